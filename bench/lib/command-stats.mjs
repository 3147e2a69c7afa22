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
