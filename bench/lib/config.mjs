/**
 * Iteration counts and durations of every scenario. `BENCH_QUICK=1` selects a ~20-second smoke run;
 * the default full run takes about 2–4 minutes. Every loop is bounded both in time and in count.
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
  /** Scenario 6: sweeps measured per lock count, at this expiry (sweep every expiry / 2). */
  sweeper: { sizes: [100, 1000, 10_000], sweeps: 4, expiryMs: 2000 },
};

const quick = {
  uncontended: { rounds: 2, warmupMs: 50, durationMs: 150, maxOps: 50_000, concurrency: 8 },
  contended: { rounds: 1, workers: 8, holdMs: 1, warmupMs: 150, durationMs: 600, drainMs: 3000 },
  handoff: { rounds: 2, reps: 20, slowReps: 4, maxMsPerContender: 3000, preHoldMinMs: 3, preHoldMaxMs: 12 },
  memory: { rounds: 2, uncontendedMs: 100, maxOps: 500_000, workers: 8, throughputMs: 300, reps: 40, slowReps: 4 },
  sweeper: { sizes: [100, 1000, 10_000], sweeps: 2, expiryMs: 1000 },
};

/** The settings in effect for this run. */
export const CONFIG = QUICK ? quick : full;
