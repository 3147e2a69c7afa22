/**
 * Scenario 5: in-process locks. globallock's MemoryLocker vs async-mutex (one Mutex per key) vs a
 * 100 ms-tick spin lock in Gitea's shape (bench/lib/spin-locker.mjs):
 *
 * - uncontended lock + release on one key, ops/s;
 * - 8 workers on one key with an empty critical section: each holds the lock across one event-loop
 *   turn (`await setImmediate()`, no work) and re-locks at once after releasing; hand-offs/s,
 *   completions per worker (max/min, Jain's index) show starvation;
 * - hand-off latency: A holds, B waits, A releases at t0, B's lock resolves at t1 (µs).
 *
 * Rounds interleave the contenders; ops/s are medians over rounds, latencies are pooled.
 */
import { CONFIG } from "../lib/config.mjs";
import { MEMORY_CONTENDERS } from "../lib/memory-contenders.mjs";
import { jain, maxOverMin, median, percentile } from "../lib/stats.mjs";
import { now, sleep, yieldToEventLoop } from "../lib/timing.mjs";

/** Sequential lock + release on one key; ops per second. */
async function uncontended(lock, durationMs, maxOps) {
  const start = now();
  const end = start + durationMs;
  let ops = 0;
  // Check the clock every 64 operations: reading it costs about as much as a lock.
  while (ops < maxOps && (ops % 64 !== 0 || now() < end)) {
    const release = await lock.lock("k");
    await release();
    ops++;
  }
  return (ops * 1000) / (now() - start);
}

/** `workers` loops on one key for `durationMs`; completions per worker and hand-offs per second. */
async function eightWaiters(lock, workers, durationMs) {
  const completions = Array(workers).fill(0);
  const start = now();
  const end = start + durationMs;
  const worker = async (index) => {
    while (now() < end) {
      const release = await lock.lock("k");
      const got = now();
      await yieldToEventLoop();
      await release();
      // A waiter that gets the key only after the deadline does not count (the spin lock's do).
      if (got < end) completions[index]++;
    }
  };
  await Promise.all(completions.map((_, index) => worker(index)));
  const total = completions.reduce((a, b) => a + b, 0);
  return { completions, perSec: (total * 1000) / durationMs };
}

/** One hand-off: latency in ms from A's release call to B's lock resolving. */
async function handoffRep(lock) {
  const releaseA = await lock.lock("h");
  let t1 = 0;
  const blocked = lock.lock("h").then((release) => {
    t1 = now();
    return release;
  });
  await sleep(1 + Math.random() * 2);
  const t0 = now();
  await releaseA();
  const releaseB = await blocked;
  await releaseB();
  return t1 - t0;
}

/**
 * Runs scenario 5.
 * @param {{ log: (line: string) => void }} context
 */
export async function runMemory({ log }) {
  const { rounds, uncontendedMs, maxOps, workers, throughputMs, reps, slowReps } = CONFIG.memory;
  const state = new Map(
    MEMORY_CONTENDERS.map((c) => [c.id, { lock: c.create(), uncontended: [], waiters: [], handoffs: [] }]),
  );
  for (const c of MEMORY_CONTENDERS) await uncontended(state.get(c.id).lock, 50, maxOps); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const c of MEMORY_CONTENDERS) {
      const s = state.get(c.id);
      s.uncontended.push(await uncontended(s.lock, uncontendedMs, maxOps));
      s.waiters.push(await eightWaiters(s.lock, workers, throughputMs));
      const quota = Math.ceil(((c.slow ? slowReps : reps) * (round + 1)) / rounds);
      while (s.handoffs.length < quota) s.handoffs.push(await handoffRep(s.lock));
    }
    log(`memory: round ${round + 1}/${rounds} done`);
  }
  const results = MEMORY_CONTENDERS.map((c) => {
    const s = state.get(c.id);
    const completions = s.waiters.map((w) => w.completions);
    return {
      id: c.id,
      label: c.label,
      uncontendedOpsPerSec: median(s.uncontended),
      handoffsPerSec: median(s.waiters.map((w) => w.perSec)),
      maxOverMin: median(completions.map(maxOverMin)),
      jain: median(completions.map(jain)),
      minCompletions: median(completions.map((x) => Math.min(...x))),
      maxCompletions: median(completions.map((x) => Math.max(...x))),
      handoffP50Us: median(s.handoffs) * 1000,
      handoffP99Us: percentile(s.handoffs, 99) * 1000,
      handoffReps: s.handoffs.length,
      rounds: { uncontendedOpsPerSec: s.uncontended, waiters: s.waiters, handoffMs: s.handoffs },
    };
  });
  return { config: CONFIG.memory, results };
}
