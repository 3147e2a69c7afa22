/**
 * Scenario 1 — no faults: N processes × M sections on shared keys with RedisLocker on one node
 * (fencing on). Exclusion must be perfect: no overlap, no lost update, no stale write, no lost
 * lease, no error, every release "released".
 */

import { checkNoLostUpdates, checkNoOverlap } from "../lib/checks.mjs";
import { now } from "../lib/clock.mjs";
import { sum } from "../report.mjs";

export default {
  id: "no-faults",
  number: "1",
  title: "no faults (RedisLocker, separate processes)",
  expected: (p) =>
    `${p.processes} proc × ${p.sections} sections, ${p.keys} keys, expiry ${p.expiry} ms: 0 overlaps, 0 lost updates, ` +
    "0 stale writes, 0 lost leases, 0 errors",
  observed: (results) =>
    `${sum(results, "sections")} sections (≈${Math.round(sum(results, "sections") / (sum(results, "seconds") || 1))}/s), ` +
    `overlaps ${sum(results, "overlaps")}, lost updates ${sum(results, "lostUpdates")}, ` +
    `fenced writes ${sum(results, "fencedAccepted")} accepted / ${sum(results, "staleWrites")} stale, ` +
    `lost leases ${sum(results, "lostLeases")}, errors ${sum(results, "errors")}`,

  async run(ctx, p, _seed, checks) {
    const keys = Array.from({ length: p.keys }, (_, i) => `k${i}`);
    return (await runClean(ctx, p, checks, { count: p.processes, keys })).clean;
  },
};

/**
 * A run without faults: `count` workers (with the profile's sections, hold, expiry and backoff,
 * plus `settings`) run their sections on `keys` to the end; then the checks of
 * {@link summarizeCleanRun}. Resolves to the referee's history and the clean-run metrics.
 */
export async function runClean(ctx, p, checks, { count, keys, settings = {}, overlapCheck = undefined }) {
  await ctx.startWorkers(count, {
    keys,
    sections: p.sections,
    hold: p.hold,
    expiry: p.expiry,
    backoffMax: p.backoffMax,
    ...settings,
  });
  const startedAt = now();
  ctx.pool.go();
  await ctx.pool.finished(p.timeoutMs);
  const seconds = (now() - startedAt) / 1000;
  const history = await ctx.finish(checks, keys);
  const expected = count * (settings.tasks ?? 1) * p.sections;
  return { history, clean: summarizeCleanRun(ctx, checks, history, expected, seconds, overlapCheck) };
}

/**
 * The checks of a run without faults (also used by the memory, semaphore and read-write variants,
 * whose C1 check is named by `overlapCheck`). Sections that complete without the C2 counter
 * (semaphore holders, readers) count as completed too.
 */
export function summarizeCleanRun(ctx, checks, history, expectedSections, seconds, overlapCheck = undefined) {
  const events = ctx.pool.events;
  checkNoOverlap(checks, history, overlapCheck);
  checkNoLostUpdates(checks, history);
  checks.equal("every section completed", history.completed + history.shared, expectedSections);
  const stale = history.fenced.staleAccepted + history.fenced.staleRejected;
  checks.equal("C3 no stale write at all", stale, 0);
  checks.equal("C3 no current write rejected", history.fenced.currentRejected, 0);
  const lost = events.filter((e) => e.type === "lost");
  checks.add("no lease lost", lost.length === 0, "0", lost.length === 0 ? "0" : `${lost.length}: ${lost[0].reason}`);
  const errors = events.filter((e) => e.type === "acquireError");
  checks.add(
    "no acquire error",
    errors.length === 0,
    "0",
    errors.length === 0 ? "0" : `${errors.length}: ${errors[0].message}`,
  );
  const notReleased = events.filter((e) => e.type === "released" && e.outcome !== "released");
  checks.add(
    'every release "released"',
    notReleased.length === 0,
    "all released",
    notReleased.length === 0 ? "all released" : `${notReleased.length} not: ${notReleased[0].outcome}`,
  );
  return {
    sections: history.completed + history.shared,
    seconds,
    overlaps: history.overlaps.length,
    lostUpdates: history.lostUpdates,
    fencedAccepted: history.fenced.currentAccepted,
    staleWrites: stale,
    lostLeases: lost.length,
    errors: errors.length,
  };
}
