/**
 * Iteration counts and durations of every scenario. `BENCH_QUICK=1` selects a ~1-minute smoke run
 * (the held-locks scenario waits for one real extension round at the 30 s expiry, ~15 s); the
 * default full run takes about 8–9 minutes (its held-locks scenario waits for two rounds per cycle). Every loop is bounded both in time and in count.
 */

/** Whether `BENCH_QUICK=1` (or any non-empty value other than 0/false) is set. */
export const QUICK = !["", "0", "false"].includes(process.env.BENCH_QUICK ?? "");

const full = {
  /** Scenarios 1–2: rounds, and per round per contender a timed loop. */
  uncontended: { rounds: 5, warmupMs: 300, durationMs: 400, maxOps: 200_000, concurrency: 8 },
  /** Scenario 3: 8 workers on one key, hold 1 ms, warm-up then a measured window. */
  contended: { rounds: 3, workers: 8, holdMs: 1, warmupMs: 300, durationMs: 3000, drainMs: 5000 },
  /** Scenario 4: hand-off repetitions per contender (spread over rounds) and a time cap each. */
  handoff: { rounds: 4, reps: 200, slowReps: 40, maxMsPerContender: 12_000, preHoldMinMs: 3, preHoldMaxMs: 12 },
  /** Scenario 5: in-process lockers. */
  memory: {
    rounds: 5,
    uncontendedMs: 200,
    maxOps: 2_000_000,
    workers: 8,
    throughputMs: 1000,
    reps: 200,
    slowReps: 20,
  },
  /**
   * Scenario 6: one locker holding none, then `sizes` locks (expiry `expiryMs`); per state,
   * `subRounds` × (sequential + 8-key loops of `durationMs`) per contender; then the first
   * extension round of the largest size and `steadyRounds` more (each half the expiry later);
   * `cycles` times over.
   */
  held: {
    cycles: 3,
    sizes: [10_000, 100_000],
    expiryMs: 30_000,
    subRounds: 2,
    warmupMs: 300,
    durationMs: 300,
    maxOps: 200_000,
    concurrency: 8,
    fillConcurrency: 128,
    roundTimeoutMs: 40_000,
    steadyRounds: 1,
  },
  /**
   * Scenario 7: `nodes` independent redis-servers, `processes` forked processes with one locker
   * each on one key, `sections` critical sections of `holdMs` per run; per round a run with every
   * node up and one with a node killed.
   */
  quorum: { rounds: 5, nodes: 5, processes: 4, sections: 10, holdMs: 5, settleMs: 200, timeoutMs: 15_000 },
  /**
   * Scenario 8: semaphores (limit 4). `uncontended` as scenarios 1–2; `contended`: `workers` on one
   * key, hold 1 ms, as scenario 3; `handoff`: as scenario 4 (same pre-release hold), the other 3 permits held throughout.
   */
  semaphore: {
    uncontended: { rounds: 5, warmupMs: 300, durationMs: 400, maxOps: 200_000, concurrency: 8 },
    contended: { rounds: 3, workers: 16, holdMs: 1, warmupMs: 300, durationMs: 2000, drainMs: 5000 },
    handoff: { rounds: 4, reps: 200, slowReps: 40, maxMsPerContender: 12_000 },
  },
};

const quick = {
  uncontended: { rounds: 2, warmupMs: 50, durationMs: 150, maxOps: 50_000, concurrency: 8 },
  contended: { rounds: 1, workers: 8, holdMs: 1, warmupMs: 150, durationMs: 600, drainMs: 3000 },
  handoff: { rounds: 2, reps: 20, slowReps: 4, maxMsPerContender: 3000, preHoldMinMs: 3, preHoldMaxMs: 12 },
  memory: { rounds: 2, uncontendedMs: 100, maxOps: 500_000, workers: 8, throughputMs: 300, reps: 40, slowReps: 4 },
  held: {
    cycles: 1,
    sizes: [10_000, 100_000],
    expiryMs: 30_000,
    subRounds: 1,
    warmupMs: 100,
    durationMs: 150,
    maxOps: 50_000,
    concurrency: 8,
    fillConcurrency: 128,
    roundTimeoutMs: 40_000,
    steadyRounds: 0,
  },
  quorum: { rounds: 2, nodes: 5, processes: 4, sections: 10, holdMs: 5, settleMs: 200, timeoutMs: 15_000 },
  semaphore: {
    uncontended: { rounds: 2, warmupMs: 50, durationMs: 150, maxOps: 50_000, concurrency: 8 },
    contended: { rounds: 1, workers: 16, holdMs: 1, warmupMs: 150, durationMs: 600, drainMs: 3000 },
    handoff: { rounds: 2, reps: 20, slowReps: 4, maxMsPerContender: 3000 },
  },
};

/** The settings in effect for this run. */
export const CONFIG = QUICK ? quick : full;
