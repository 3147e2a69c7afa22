/**
 * A benchmark worker process, forked by bench/run.mjs (never run it directly). It hosts Redis lock
 * sessions in a second process so that contention and hand-off can be measured across processes.
 * The parent drives it over IPC (see lib/rpc.mjs); times are exchanged as epoch milliseconds
 * (`performance.timeOrigin + performance.now()`), which is one clock for every process of a machine.
 */
import { clientCommandSnapshot, countClientCommands, diffCounts, processCpuMs } from "./lib/command-stats.mjs";
import { contend } from "./lib/contention.mjs";
import { closeQuorum, openQuorum, runQuorumSections } from "./lib/quorum.mjs";
import { CONTENDERS } from "./lib/redis-contenders.mjs";
import { serve } from "./lib/rpc.mjs";
import { epochNow, epochToLocal, runAt } from "./lib/timing.mjs";

countClientCommands();

/** Sessions of the prepared contention run. */
let contention;
/** Hand-off sessions (side B) by id. */
const handoffs = new Map();
/** The quorum locker of this process (scenario 7). */
let quorum;

/** Opens `count` sessions of a contender, or one shared by all when `shared`. */
async function openSessions(contender, port, count, shared) {
  if (shared) {
    const session = await contender.open(port);
    return Array.from({ length: count }, () => session);
  }
  return Promise.all(Array.from({ length: count }, () => contender.open(port)));
}

/** Closes each distinct session once. */
async function closeSessions(sessions) {
  for (const session of new Set(sessions)) await session.close();
}

serve({
  /** This process's epoch clock, for the parent's clock-offset check. */
  clock: () => epochNow(),

  /** Opens and warms the sessions of one contention run. */
  async prepareContention({ contenderId, port, workers, shared, warmKey }) {
    const sessions = await openSessions(CONTENDERS[contenderId], port, workers, shared);
    for (const session of new Set(sessions)) {
      const release = await session.lock(warmKey);
      await release?.();
    }
    contention = sessions;
    return "ready";
  },

  /** Runs the prepared contention on the shared schedule and reports what happened in the window. */
  async runContention({ key, holdMs, startAtEpoch, windowStartEpoch, windowEndEpoch, drainMs }) {
    const windowStart = epochToLocal(windowStartEpoch);
    const windowEnd = epochToLocal(windowEndEpoch);
    const snapshot = () => ({ commands: clientCommandSnapshot(), cpuMs: processCpuMs() });
    const before = runAt(windowStart, snapshot);
    const after = runAt(windowEnd, snapshot);
    const result = await contend({
      sessions: contention,
      key,
      holdMs,
      startAt: epochToLocal(startAtEpoch),
      windowStart,
      windowEnd,
      drainMs,
    });
    const [b, a] = [await before, await after];
    await closeSessions(contention);
    contention = undefined;
    return { ...result, clientCommands: diffCounts(b.commands, a.commands), cpuMs: a.cpuMs - b.cpuMs };
  },

  /** Opens a session for the waiting side B of the hand-off scenario. */
  async prepareHandoff({ sessionId, contenderId, port }) {
    handoffs.set(sessionId, { session: await CONTENDERS[contenderId].open(port), pending: undefined });
    return "ready";
  },

  /** B calls lock on `key` (held by the parent); answers as soon as the call is made. */
  block({ sessionId, key }) {
    const b = handoffs.get(sessionId);
    b.pending = b.session.lock(key).then((release) => ({ release, t1: epochNow() }));
    return "blocking";
  },

  /** Waits for B's lock, releases it, and reports when it resolved (epoch ms). */
  async acquired({ sessionId }) {
    const b = handoffs.get(sessionId);
    const { release, t1 } = await b.pending;
    b.pending = undefined;
    if (release === undefined) return { t1: undefined };
    await release();
    return { t1 };
  },

  /** Opens this process's locker over the quorum's nodes. */
  async openQuorum(args) {
    quorum = await openQuorum(args);
    return "ready";
  },

  /** Runs the quorum loop on the shared schedule (see lib/quorum.mjs). */
  runQuorum: (args) => runQuorumSections(quorum, args),

  /** Closes the quorum locker and its clients. */
  async closeQuorum() {
    if (quorum !== undefined) await closeQuorum(quorum);
    quorum = undefined;
    return "closed";
  },

  /** Closes every hand-off session. */
  async closeHandoffs() {
    for (const b of handoffs.values()) await b.session.close();
    handoffs.clear();
    return "closed";
  },
});
