/**
 * Scenario 0 — the checkers' control run: the same workers, with NO lock and a plain (unfenced)
 * write of the resource. Each checker must report violations here; a checker that stays silent
 * without a lock would prove nothing when it stays silent with one.
 */
import { sum } from "../report.mjs";

export default {
  id: "control",
  number: "0",
  title: "control: no lock, unfenced writes",
  expected: () => "C1 overlaps > 0, C2 lost updates > 0, C3 stale writes accepted > 0 (the checkers can fail)",
  observed: (results) =>
    `overlaps ${sum(results, "overlaps")}, lost updates ${sum(results, "lostUpdates")}, ` +
    `stale accepted ${sum(results, "staleAccepted")}`,

  async run(ctx, p, _seed, checks) {
    const keys = ["k0"];
    await ctx.startWorkers(p.processes, {
      mode: "none",
      writer: "unfenced",
      fencing: true,
      keys,
      sections: p.sections,
      hold: p.hold,
    });
    ctx.pool.go();
    await ctx.pool.finished(p.timeoutMs);
    const history = await ctx.finish(checks, keys);
    checks.atLeast("C1 detects overlaps", history.overlaps.length, 1);
    checks.atLeast("C2 detects lost updates", history.lostUpdates, 1);
    checks.atLeast("C3 detects accepted stale writes", history.fenced.staleAccepted, 1);
    return {
      overlaps: history.overlaps.length,
      lostUpdates: history.lostUpdates,
      staleAccepted: history.fenced.staleAccepted,
    };
  },
};
