/**
 * Scenario 6: speed at scale. One RedisLocker (expiry 30 s, its lease keeper extending every held
 * lock) holds none, then 10,000, then 100,000 locks, taken with lock (the way a caller holds one:
 * its release function kept) on distinct keys; in each
 * state, uncontended acquire + release runs on *other* keys of that same locker, sequentially and
 * 8 keys at once, as in scenario 2. Reported:
 *
 * - ops/s with N held ÷ ops/s with none held, per cycle (none held is measured at the start of the
 *   same cycle, before the fill), median over cycles; with the Node CPU (process.cpuUsage) and
 *   redis-server CPU (INFO cpu) per operation. The raw floor (its own connection, same process)
 *   runs in every state too, as a control: the part of a drop that it shares comes from the
 *   environment (a bigger heap to collect, more keys in Redis), not from the locker.
 * - heap bytes per held lock: V8 heapUsed after forced full collections, with N held minus with
 *   none held, ÷ N (the array that keeps the release functions is allocated before the baseline);
 *   memory outside the heap (Buffers) the same way; and what is left once all are released.
 * - extension rounds of all 100,000 at the realistic expiry: observed from outside on the
 *   locker's client (lib/sweep-observer.mjs) once the rate loops are done, the process then being
 *   idle apart from the keeper. Wall time = the bursts' spans (first extension command sent → last
 *   reply) plus the keeper's synchronous work before each burst's first command (from the last
 *   tick of a 2 ms heartbeat); CPU = process.cpuUsage (every thread) and the main thread's alone
 *   over the same. The first round after the fill and the next one, reported apart: the first
 *   often pays a major collection of the heap the fill just grew (parallel marking on V8's helper
 *   threads), the next is what a process holding the locks pays every half expiry. Then its
 *   floor: as many keys extended from a bare client in the same batches
 *   (lib/raw-extension-round.mjs), with the Redis CPU it took.
 *
 * Within a state, the two contenders alternate in sub-rounds (globallock, raw, globallock, raw…).
 */
import { RedisLocker } from "globallock";
import { measureCosts } from "../lib/command-stats.mjs";
import { CONFIG } from "../lib/config.mjs";
import { heapAfterGc } from "../lib/heap.mjs";
import { rawExtensionRounds } from "../lib/raw-extension-round.mjs";
import { connectClient } from "../lib/redis-client.mjs";
import { raw } from "../lib/redis-contenders.mjs";
import { median } from "../lib/stats.mjs";
import { observeRounds } from "../lib/sweep-observer.mjs";
import { now } from "../lib/timing.mjs";
import { concurrent, sequential } from "./uncontended.mjs";

/** Runs `task(i)` for i in [from, to) with at most `concurrency` in flight. */
async function forRange(from, to, concurrency, task) {
  let next = from;
  const lane = async () => {
    while (next < to) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, to - from) }, lane));
}

/** Sequential and 8-key loops of each session, alternating, `subRounds` times. */
async function measureRates(sessions, monitor, state) {
  const { subRounds, durationMs, maxOps, concurrency } = CONFIG.held;
  const samples = Object.fromEntries(sessions.map(({ id }) => [id, []]));
  for (let round = 0; round < subRounds; round++) {
    for (const { id, session } of sessions) {
      const key = `bench:held-other:${id}`;
      const seq = await measureCosts(monitor, () => sequential(session, key, durationMs, maxOps));
      const conc = await measureCosts(monitor, () => concurrent(session, key, concurrency, durationMs, maxOps));
      samples[id].push({
        state,
        seqOpsPerSec: (seq.result.ops * 1000) / seq.result.elapsedMs,
        seqNodeCpuUsPerOp: (seq.nodeCpuMs * 1000) / seq.result.ops,
        seqRedisCpuUsPerOp: (seq.redisCpuMs * 1000) / seq.result.ops,
        concOpsPerSec: (conc.result.ops * 1000) / conc.result.elapsedMs,
        concNodeCpuUsPerOp: (conc.nodeCpuMs * 1000) / conc.result.ops,
        concRedisCpuUsPerOp: (conc.redisCpuMs * 1000) / conc.result.ops,
      });
    }
  }
  return samples;
}

const RATE_FIELDS = [
  "seqOpsPerSec",
  "seqNodeCpuUsPerOp",
  "seqRedisCpuUsPerOp",
  "concOpsPerSec",
  "concNodeCpuUsPerOp",
  "concRedisCpuUsPerOp",
];

/** Medians of each rate field over samples. */
const medians = (samples) => Object.fromEntries(RATE_FIELDS.map((f) => [f, median(samples.map((s) => s[f]))]));

/**
 * Runs scenario 6.
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 */
export async function runHeld({ port, monitor, log }) {
  const { cycles, sizes, expiryMs, fillConcurrency, warmupMs, maxOps, concurrency, roundTimeoutMs, steadyRounds } =
    CONFIG.held;
  const largest = Math.max(...sizes);
  await monitor.flushall();
  const client = await connectClient(port);
  let lost = 0;
  const locker = new RedisLocker(client, { expiry: expiryMs, onLockLost: () => lost++ });
  const rawSession = await raw.open(port);
  const sessions = [
    {
      id: "globallock",
      label: "globallock RedisLocker (the locker holding the N locks)",
      session: { lock: (key) => locker.lock(undefined, key) },
    },
    { id: "raw", label: "raw floor, own connection (control)", session: rawSession },
  ];
  const observer = observeRounds(client, locker);
  // Allocated before any baseline heap measurement, so that it is not counted per lock.
  const releases = new Array(largest).fill(undefined);
  let held = 0;
  const cycleResults = [];
  try {
    for (const { id, session } of sessions) {
      await sequential(session, `bench:held-warm:${id}`, warmupMs, maxOps);
      await concurrent(session, `bench:held-warm:${id}`, concurrency, warmupMs, maxOps);
    }
    for (let cycle = 0; cycle < cycles; cycle++) {
      const states = [];
      const rates0 = await measureRates(sessions, monitor, 0);
      const heap0 = await heapAfterGc();
      states.push({ held: 0, rates: rates0, heap: heap0 });
      for (const size of sizes) {
        const fillStart = now();
        await forRange(held, size, fillConcurrency, async (i) => {
          // Free keys: a lock that has to wait means another run left one behind.
          releases[i] = await locker.lock(AbortSignal.timeout(10_000), `held:${i}`);
        });
        const fillMs = now() - fillStart;
        const filled = size - held;
        held = size;
        if (locker.heldCount !== size) throw new Error(`held: heldCount ${locker.heldCount}, expected ${size}`);
        const heap = await heapAfterGc();
        const rates = await measureRates(sessions, monitor, size);
        states.push({ held: size, fillMs, fillPerSec: (filled * 1000) / fillMs, heap, rates });
        log(`held: cycle ${cycle + 1}/${cycles}, ${size} held`);
      }
      // Extension rounds of everything held (the keeper's own schedule, nothing else running): the
      // first after the fill, then the next ones (the steady state of a process holding them).
      const observeOne = async (which) => {
        const statsBefore = locker.leaseStats;
        const round = await observer.round(held, roundTimeoutMs);
        const statsAfter = locker.leaseStats;
        round.batches = statsAfter.batches - statsBefore.batches;
        round.retries = statsAfter.retries - statsBefore.retries;
        round.locks = held;
        log(
          `held: cycle ${cycle + 1}/${cycles}, ${which} extension round of ${held} seen (${round.bursts.length} bursts)`,
        );
        return round;
      };
      const sweep = await observeOne("first");
      sweep.steady = [];
      for (let round = 0; round < steadyRounds; round++) sweep.steady.push(await observeOne("next"));
      // The floor of those rounds: as many keys extended from a bare client, same batches.
      [sweep.floor] = await rawExtensionRounds(port, monitor, { count: held, ttlMs: expiryMs, rounds: 1 });
      const releaseStart = now();
      await forRange(0, held, fillConcurrency, async (i) => {
        const release = releases[i];
        releases[i] = undefined;
        await release();
      });
      const releaseMs = now() - releaseStart;
      const releasedCount = held;
      held = 0;
      const heapEnd = await heapAfterGc();
      cycleResults.push({ states, sweep, releaseMs, releasePerSec: (releasedCount * 1000) / releaseMs, heapEnd });
    }
  } finally {
    observer.detach();
    await forRange(0, held, fillConcurrency, (i) => releases[i]?.());
    await locker.close();
    client.disconnect();
    await rawSession.close();
  }

  // Per state: rates (median over all sub-rounds and cycles), ratios to none held per cycle.
  const stateSizes = [0, ...sizes];
  const rows = [];
  for (const { id, label } of sessions) {
    for (const size of stateSizes) {
      const perCycle = cycleResults.map((c) => medians(c.states.find((s) => s.held === size).rates[id]));
      const basePerCycle = cycleResults.map((c) => medians(c.states.find((s) => s.held === 0).rates[id]));
      const all = cycleResults.flatMap((c) => c.states.find((s) => s.held === size).rates[id]);
      rows.push({
        contender: id,
        label,
        held: size,
        ...medians(all),
        seqRatio: median(perCycle.map((r, i) => r.seqOpsPerSec / basePerCycle[i].seqOpsPerSec)),
        concRatio: median(perCycle.map((r, i) => r.concOpsPerSec / basePerCycle[i].concOpsPerSec)),
      });
    }
  }
  const memory = sizes.map((size) => {
    const perCycle = cycleResults.map((c) => {
      const base = c.states.find((s) => s.held === 0);
      const state = c.states.find((s) => s.held === size);
      return {
        heapPerLock: (state.heap.heapUsed - base.heap.heapUsed) / size,
        externalPerLock: (state.heap.external - base.heap.external) / size,
        fillMs: state.fillMs,
        fillPerSec: state.fillPerSec,
      };
    });
    return {
      held: size,
      heapBytesPerLock: median(perCycle.map((c) => c.heapPerLock)),
      externalBytesPerLock: median(perCycle.map((c) => c.externalPerLock)),
      fillMs: median(perCycle.map((c) => c.fillMs)),
      fillPerSec: median(perCycle.map((c) => c.fillPerSec)),
    };
  });
  const sweeps = cycleResults.map((c) => c.sweep);
  const sweepSummary = {
    ...summarizeRounds(sweeps, largest),
    steady: summarizeRounds(
      sweeps.flatMap((s) => s.steady),
      largest,
    ),
    floor: {
      rounds: sweeps.length,
      wallMs: median(sweeps.map((s) => s.floor.wallMs)),
      nodeCpuMs: median(sweeps.map((s) => s.floor.nodeCpuMs)),
      redisCpuMs: median(sweeps.map((s) => s.floor.redisCpuMs)),
    },
  };
  return {
    config: { ...CONFIG.held },
    rows,
    memory,
    sweep: sweepSummary,
    retainedAfterReleaseBytes: median(
      cycleResults.map((c) => c.heapEnd.heapUsed - c.states.find((s) => s.held === 0).heap.heapUsed),
    ),
    releasePerSec: median(cycleResults.map((c) => c.releasePerSec)),
    lost,
    leaseStats: locker.leaseStats,
    cycles: cycleResults,
  };
}

/** Medians (and worsts) over the complete rounds of `rounds`, each of `locks` held locks. */
function summarizeRounds(rounds, locks) {
  const complete = rounds.filter((s) => s.complete);
  const worst = (field) => (complete.length > 0 ? Math.max(...complete.map((s) => s[field])) : Number.NaN);
  return {
    locks,
    observed: complete.length,
    of: rounds.length,
    wallMs: median(complete.map((s) => s.wallMs)),
    spanMs: median(complete.map((s) => s.spanMs)),
    cpuMs: median(complete.map((s) => s.cpuMs)),
    mainCpuMs: median(complete.map((s) => s.mainCpuMs)),
    preSendMs: median(complete.map((s) => s.preSendMs)),
    bursts: median(complete.map((s) => s.bursts.length)),
    commands: median(complete.map((s) => s.commands)),
    errors: complete.reduce((sum, s) => sum + s.errors, 0),
    worstWallMs: worst("wallMs"),
    worstCpuMs: worst("cpuMs"),
    worstMainCpuMs: worst("mainCpuMs"),
  };
}
