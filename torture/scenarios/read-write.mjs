/**
 * Scenario 15 — read-write locks, no faults: N processes × M sections on one key with a
 * `RedisReadWriteLocker`, each section a writer (seeded share) or a reader. On the referee a writer
 * weighs as much as the whole limit and a reader 1, so C1 reports any writer together with anyone
 * (or two writers). Writers are lock holders (fencing tokens, the C2 counter, C3 writes); readers
 * only read. Readers must actually overlap (two or more at once), and writers must not be starved:
 * a waiting writer blocks the readers that arrive after it, so its wait stays short.
 */
import { range, sum } from "../report.mjs";
import { describeWaits, readWriteSettings, waitsOf } from "./counted.mjs";
import { runClean } from "./no-faults.mjs";

export default {
  id: "read-write",
  number: "15",
  title: "read-write locks, no faults (RedisReadWriteLocker, separate processes)",
  expected: (p) =>
    `${p.processes} proc × ${p.sections} sections, ${Math.round(p.writerShare * 100)} % writers: never a writer ` +
    `with anyone; readers overlap (≥ 2 at once); every writer wait ≤ ${p.waitBoundMs} ms; 0 lost updates, ` +
    "0 stale writes, 0 lost leases, 0 errors",
  observed: (results) =>
    `${sum(results, "writerSections")} writer + ${sum(results, "readerSections")} reader sections; writer with ` +
    `anyone ${sum(results, "overlaps")} times; most readers at once ${range(results, "maxReaders", "")}, most ` +
    `writers ${range(results, "maxWriters", "")}; writer wait p50 ${range(results, "writerWaitP50Ms")}, max ` +
    `${range(results, "writerWaitMaxMs")}; reader wait max ${range(results, "readerWaitMaxMs")}; lost updates ` +
    `${sum(results, "lostUpdates")}, stale writes ${sum(results, "staleWrites")}, errors ${sum(results, "errors")}`,

  async run(ctx, p, _seed, checks) {
    const { history, clean } = await runClean(ctx, p, checks, {
      count: p.processes,
      keys: ["k0"],
      settings: readWriteSettings(p),
      overlapCheck: "C1 never a writer together with anyone",
    });
    const { read = 0, write = 0 } = history.peaks;
    checks.atMost("most writers at once", write, 1);
    checks.atLeast("readers do overlap (most readers at once)", read, 2);
    checks.atLeast("writer sections", history.completed, 1);
    const writers = waitsOf(ctx.pool.events, (e) => e.role === "write");
    const readers = waitsOf(ctx.pool.events, (e) => e.role === "read");
    checks.add(
      `writers not starved: every writer wait ≤ ${p.waitBoundMs} ms`,
      writers.count > 0 && writers.max <= p.waitBoundMs,
      `≤ ${p.waitBoundMs} ms`,
      describeWaits(writers),
    );
    checks.add(
      `readers not starved: every reader wait ≤ ${p.waitBoundMs} ms`,
      readers.count > 0 && readers.max <= p.waitBoundMs,
      `≤ ${p.waitBoundMs} ms`,
      describeWaits(readers),
    );
    return {
      ...clean,
      writerSections: history.completed,
      readerSections: history.shared,
      maxReaders: read,
      maxWriters: write,
      writerWaitP50Ms: writers.p50,
      writerWaitMaxMs: writers.max,
      readerWaitMaxMs: readers.max,
    };
  },
};
