/**
 * Counting Redis commands (and CPU time) two ways:
 *
 * - server side, from `INFO commandstats` (the `calls=` of every `cmdstat_*` line). This counts
 *   what Redis executed, including the commands run inside Lua scripts (GET, SET, DEL, PUBLISH…).
 * - client side, by counting every command an ioredis client of this process sends (one count
 *   per request, i.e. per round trip's worth of work; commands inside scripts are not seen).
 *
 * Connection set-up and the benchmark's own probes (INFO, CONFIG, FLUSHALL, HELLO, CLIENT …) are
 * "housekeeping" and left out of both counts.
 */
import { Redis } from "ioredis";

const HOUSEKEEPING = /^(info|config|flushall|flushdb|hello|client|ping|select|command|script|quit|auth)(\||$)/;

/**
 * Whether a command name (lower case, `container|subcommand` as in INFO) is housekeeping.
 * @param {string} name
 */
export const isHousekeeping = (name) => HOUSEKEEPING.test(name);

/**
 * Reads `INFO commandstats`: calls per command, housekeeping excluded.
 * @param {import("ioredis").Redis} client
 * @returns {Promise<Record<string, number>>}
 */
export async function readCommandStats(client) {
  const text = await client.info("commandstats");
  /** @type {Record<string, number>} */
  const calls = {};
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!isHousekeeping(match[1])) calls[match[1]] = Number(match[2]);
  }
  return calls;
}

/**
 * Redis server CPU time so far (user + system, ms), from `INFO cpu`.
 * @param {import("ioredis").Redis} client
 */
export async function readRedisCpuMs(client) {
  const text = await client.info("cpu");
  const user = Number(/^used_cpu_user:([\d.]+)/m.exec(text)?.[1]);
  const system = Number(/^used_cpu_sys:([\d.]+)/m.exec(text)?.[1]);
  return (user + system) * 1000;
}

/**
 * Both server counters in one request (`INFO cpu commandstats`): calls per command (housekeeping
 * excluded) and redis-server's CPU time so far (user + system, ms).
 * @param {import("ioredis").Redis} client
 * @returns {Promise<{ calls: Record<string, number>, cpuMs: number }>}
 */
export async function readServerCounters(client) {
  const text = await client.call("INFO", "cpu", "commandstats");
  /** @type {Record<string, number>} */
  const calls = {};
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!isHousekeeping(match[1])) calls[match[1]] = Number(match[2]);
  }
  const user = Number(/^used_cpu_user:([\d.]+)/m.exec(text)?.[1]);
  const system = Number(/^used_cpu_sys:([\d.]+)/m.exec(text)?.[1]);
  return { calls, cpuMs: (user + system) * 1000 };
}

/**
 * Runs `fn` and reports what it cost: Node CPU (this process), redis-server CPU, commands Redis
 * executed (INFO commandstats: top-level and inside scripts) and commands this process's clients
 * sent (top-level only). The server is read before the Node counters are started and after they
 * are stopped, so the probes' own Node CPU is left out.
 * @template T
 * @param {import("ioredis").Redis} monitor
 * @param {() => Promise<T>} fn
 * @returns {Promise<{ result: T, nodeCpuMs: number, redisCpuMs: number, server: Record<string, number>, client: Record<string, number> }>}
 */
export async function measureCosts(monitor, fn) {
  const serverBefore = await readServerCounters(monitor);
  const clientBefore = clientCommandSnapshot();
  const nodeBefore = processCpuMs();
  const result = await fn();
  const nodeCpuMs = processCpuMs() - nodeBefore;
  const client = diffCounts(clientBefore, clientCommandSnapshot());
  const serverAfter = await readServerCounters(monitor);
  return {
    result,
    nodeCpuMs,
    redisCpuMs: serverAfter.cpuMs - serverBefore.cpuMs,
    server: diffCounts(serverBefore.calls, serverAfter.calls),
    client,
  };
}

/**
 * Splits the commands Redis executed into top-level ones (sent by clients) and those run inside
 * Lua scripts: per command, inner = executed − sent.
 * @param {Record<string, number>} server executed (INFO commandstats delta)
 * @param {Record<string, number>} client sent (client-side delta)
 */
export function splitTopLevel(server, client) {
  /** @type {Record<string, number>} */
  const topLevel = {};
  /** @type {Record<string, number>} */
  const inner = {};
  for (const [name, count] of Object.entries(server)) {
    const sent = Math.min(count, client[name] ?? 0);
    if (sent > 0) topLevel[name] = sent;
    if (count - sent > 0) inner[name] = count - sent;
  }
  return { topLevel, inner };
}

/** This process's CPU time so far (user + system, ms). */
export function processCpuMs() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * `after − before` per command, keeping only commands that changed.
 * @param {Record<string, number>} before
 * @param {Record<string, number>} after
 * @returns {Record<string, number>}
 */
export function diffCounts(before, after) {
  /** @type {Record<string, number>} */
  const delta = {};
  for (const [name, count] of Object.entries(after)) {
    const change = count - (before[name] ?? 0);
    if (change !== 0) delta[name] = change;
  }
  return delta;
}

/**
 * Adds count maps together.
 * @param {Array<Record<string, number>>} maps
 */
export function sumCounts(maps) {
  /** @type {Record<string, number>} */
  const total = {};
  for (const map of maps) {
    for (const [name, count] of Object.entries(map)) total[name] = (total[name] ?? 0) + count;
  }
  return total;
}

/** Total of all counts in a map. */
export const totalOf = (counts) => Object.values(counts).reduce((a, b) => a + b, 0);

/** Commands sent by this process's ioredis clients, by name; filled once {@link countClientCommands} ran. */
const sent = {};
let counting = false;

/**
 * Starts counting, in this process, every command any ioredis client sends (including the
 * subscriber connections libraries duplicate from our clients). Idempotent.
 */
export function countClientCommands() {
  if (counting) return;
  counting = true;
  const original = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function countedSendCommand(command, stream) {
    // Re-sends of commands queued while offline pass a stream; count each request once.
    if (stream === undefined) {
      const name = String(command.name).toLowerCase();
      if (!isHousekeeping(name)) sent[name] = (sent[name] ?? 0) + 1;
    }
    return original.call(this, command, stream);
  };
}

/** A copy of the client-side command counts so far. */
export const clientCommandSnapshot = () => ({ ...sent });
