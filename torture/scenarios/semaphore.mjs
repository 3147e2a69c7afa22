/**
 * Scenario 13 — semaphore, no faults: N processes × M sections on one key with a `RedisSemaphore`
 * (limit L); each section takes a seeded weight. The referee adds each holder's weight to the
 * permits in use on entry and takes it back on exit (C1 with weights): an entry that takes the
 * permits in use above L is a violation. Holders must actually share (two or more at once), nobody
 * may wait long (strict FIFO: a heavy waiter is not overtaken forever by light ones), and nothing
 * may fail: no lost lease, no error, every release "released".
 */
import { range, sum } from "../report.mjs";
import { describeWaits, semaphoreSettings, waitsOf } from "./counted.mjs";
import { runClean } from "./no-faults.mjs";

export default {
  id: "semaphore",
  number: "13",
  title: "semaphore, no faults (RedisSemaphore, separate processes)",
  expected: (p) =>
    `${p.processes} proc × ${p.sections} sections, limit ${p.limit}, weights ${p.weights.min}–${p.weights.max}: ` +
    `permits in use never above ${p.limit}; ≥ 2 holders at once; every wait ≤ ${p.waitBoundMs} ms; ` +
    "0 lost leases, 0 errors",
  observed: (results) =>
    `${sum(results, "sections")} sections, limit exceeded ${sum(results, "overlaps")} times; most permits in use ` +
    `${range(results, "maxPermits", "")}, most holders ${range(results, "maxHolders", "")}; waits p50 ` +
    `${range(results, "waitP50Ms")}, p99 ${range(results, "waitP99Ms")}, max ${range(results, "waitMaxMs")} ` +
    `(heaviest weight: max ${range(results, "heavyWaitMaxMs")}); lost leases ${sum(results, "lostLeases")}, ` +
    `errors ${sum(results, "errors")}`,

  async run(ctx, p, _seed, checks) {
    const keys = Array.from({ length: p.keys }, (_, i) => `k${i}`);
    const { history, clean } = await runClean(ctx, p, checks, {
      count: p.processes,
      keys,
      settings: semaphoreSettings(p),
      overlapCheck: `C1 permits in use never above the limit (${p.limit})`,
    });
    const { permits = 0, holders = 0 } = history.peaks;
    checks.atMost("most permits in use at once (referee)", permits, p.limit);
    checks.atLeast("holders share the permits (most holders at once)", holders, 2);
    const waits = waitsOf(ctx.pool.events);
    const heavy = waitsOf(ctx.pool.events, (e) => e.weight === p.weights.max);
    checks.add(
      `every wait ≤ ${p.waitBoundMs} ms (FIFO: nobody overtaken for long)`,
      waits.max <= p.waitBoundMs,
      `≤ ${p.waitBoundMs} ms`,
      describeWaits(waits),
    );
    checks.add(
      `the heaviest weight (${p.weights.max}) is served`,
      heavy.count > 0 && heavy.max <= p.waitBoundMs,
      `≥ 1 section, waits ≤ ${p.waitBoundMs} ms`,
      describeWaits(heavy),
    );
    return {
      ...clean,
      maxPermits: permits,
      maxHolders: holders,
      waitP50Ms: waits.p50,
      waitP99Ms: waits.p99,
      waitMaxMs: waits.max,
      heavyWaitMaxMs: heavy.max,
    };
  },
};
