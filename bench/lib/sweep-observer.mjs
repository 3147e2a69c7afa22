/**
 * Observes a RedisLocker's extension rounds from outside (the benchmark does not touch src/).
 *
 * Once the locker holds its locks and nothing else uses its client, every command on that client
 * is the lease keeper's. An instance-level wrapper of the client's `sendCommand` notes each command
 * sent and each reply; commands separated by {@link GAP_MS} of quiet form one burst. The keeper
 * extends leases acquired close together in one burst, so one round over all held locks may be
 * several bursts (one per group of leases); a round is complete once the bursts seen extended as
 * many locks as are held (`leaseStats.extensions`, read at each burst's start and end).
 *
 * Per burst: its span (first command sent → last reply) and its CPU time (`process.cpuUsage` from
 * the first command to the quiet point after the last reply). The keeper's synchronous work
 * before a burst (collecting the due leases, building batches) runs in its timer callback just
 * before the first command is sent, where no wrapper sees it start; so while a round is observed a
 * heartbeat timer notes the time and CPU every {@link HEARTBEAT_MS} ms, and a burst also counts the
 * time and CPU from the last heartbeat before its first command ("pre-send": that work, plus at
 * most one heartbeat interval of idle time, so an upper bound). Wall time of a burst = pre-send +
 * span; its CPU = pre-send CPU + CPU from the first command to the quiet point.
 *
 * CPU is counted twice: for the whole process (`process.cpuUsage`: the main thread and V8's and
 * libuv's helper threads — a round that starts a major collection of the heap pays its parallel
 * marking there) and, on Linux, for the main thread alone (its `schedstat`), the keeper's own work.
 */
import { readFileSync } from "node:fs";
import { now } from "./timing.mjs";

/** Quiet time (ms) that separates two bursts. */
export const GAP_MS = 50;
/** Interval of the heartbeat that dates the start of the keeper's work before a burst (ms). */
export const HEARTBEAT_MS = 2;

const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** The main thread's schedstat (Linux: its first field is the thread's time on a CPU, in ns). */
const MAIN_THREAD_SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;

/** The main thread's CPU time in ms, or NaN where the system does not tell (not Linux). */
export function mainThreadCpuMs() {
  try {
    return Number(readFileSync(MAIN_THREAD_SCHEDSTAT, "latin1").split(" ")[0]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/**
 * @typedef {object} Burst
 * @property {number} commands commands sent
 * @property {number} errors replies that were errors
 * @property {number} extensions locks extended (leaseStats.extensions delta)
 * @property {number} spanMs first command sent → last reply
 * @property {number} preSendMs last heartbeat → first command
 * @property {number} preSendCpuMs CPU over the same
 * @property {number} cpuMs preSendCpuMs + CPU from the first command to the quiet point after the last reply
 * @property {number} mainCpuMs the same for the main thread alone (NaN off Linux)
 * @property {number} wallMs preSendMs + spanMs
 */

/**
 * Wraps `client` (the locker's only client) and returns a handle to observe one round.
 * @param {import("ioredis").Redis} client
 * @param {{ leaseStats: { extensions: number } }} locker
 */
export function observeRounds(client, locker) {
  const original = client.sendCommand;
  const hadOwn = Object.hasOwn(client, "sendCommand");
  let enabled = false;
  let enabledAt = 0;
  let inFlight = 0;
  let beatAt = 0;
  let beatCpuMs = 0;
  let beatMainCpuMs = 0;
  /** The burst under way. */
  let current;
  /** @type {Burst[]} */
  let bursts = [];
  let onBurst = () => undefined;

  const close = (burst) => {
    if (current !== burst || inFlight > 0 || now() - burst.lastReplyAt < GAP_MS) return;
    current = undefined;
    const endCpu = cpuMs();
    const endMainCpu = mainThreadCpuMs();
    // A burst that began right after observation started may have been under way before it.
    if (burst.start - enabledAt < GAP_MS) return;
    const spanMs = burst.lastReplyAt - burst.start;
    bursts.push({
      commands: burst.commands,
      errors: burst.errors,
      extensions: locker.leaseStats.extensions - burst.extensionsAtStart,
      spanMs,
      preSendMs: burst.preSendMs,
      preSendCpuMs: burst.preSendCpuMs,
      cpuMs: burst.preSendCpuMs + endCpu - burst.cpuStart,
      mainCpuMs: burst.preSendMainCpuMs + endMainCpu - burst.mainCpuStart,
      wallMs: burst.preSendMs + spanMs,
    });
    onBurst();
  };
  const onReply = (burst, failed) => {
    inFlight--;
    if (failed) burst.errors++;
    if (inFlight === 0) {
      burst.lastReplyAt = now();
      setTimeout(() => close(burst), GAP_MS + 1);
    }
  };
  client.sendCommand = function observedSendCommand(command, stream) {
    if (!enabled || stream !== undefined) return original.call(this, command, stream);
    if (current === undefined) {
      const cpuStart = cpuMs();
      const mainCpuStart = mainThreadCpuMs();
      const start = now();
      current = {
        start,
        cpuStart,
        mainCpuStart,
        preSendMainCpuMs: mainCpuStart - beatMainCpuMs,
        preSendMs: start - beatAt,
        preSendCpuMs: cpuStart - beatCpuMs,
        extensionsAtStart: locker.leaseStats.extensions,
        commands: 0,
        errors: 0,
        lastReplyAt: 0,
      };
    }
    const burst = current;
    burst.commands++;
    inFlight++;
    const reply = original.call(this, command, stream);
    reply.then(
      () => onReply(burst, false),
      () => onReply(burst, true),
    );
    return reply;
  };

  return {
    /**
     * Waits for one whole round: bursts (each begun after this call) until they extended at least
     * `locks` locks, or `timeoutMs` passed.
     * @param {number} locks
     * @param {number} timeoutMs
     */
    async round(locks, timeoutMs) {
      bursts = [];
      enabled = true;
      enabledAt = now();
      const beat = () => {
        beatAt = now();
        beatCpuMs = cpuMs();
        beatMainCpuMs = mainThreadCpuMs();
      };
      beat();
      const heartbeat = setInterval(beat, HEARTBEAT_MS);
      const extended = () => bursts.reduce((sum, b) => sum + b.extensions, 0);
      let timer;
      const complete = await new Promise((resolve) => {
        onBurst = () => {
          if (extended() >= locks) resolve(true);
        };
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      clearTimeout(timer);
      clearInterval(heartbeat);
      onBurst = () => undefined;
      enabled = false;
      const sum = (field) => bursts.reduce((total, b) => total + b[field], 0);
      return {
        complete,
        bursts: [...bursts],
        extensions: extended(),
        commands: sum("commands"),
        errors: sum("errors"),
        wallMs: sum("wallMs"),
        spanMs: sum("spanMs"),
        preSendMs: sum("preSendMs"),
        cpuMs: sum("cpuMs"),
        mainCpuMs: sum("mainCpuMs"),
        waitedMs: now() - enabledAt,
      };
    },
    /** Puts the client's own sendCommand back. */
    detach() {
      enabled = false;
      if (hadOwn) client.sendCommand = original;
      else delete client.sendCommand;
    },
  };
}
