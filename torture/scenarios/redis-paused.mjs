/**
 * Scenario 7 — the lock server is SIGSTOPped for 2 × expiry while a holder is inside its section
 * (the holder's section ends during the freeze, so its release is sent to a frozen server). Nothing
 * can be granted while Redis is frozen, so there must be no overlap. What must hold:
 *
 * - the holder learns of the loss from its own clock: `lost` fires with reason "expired" at its
 *   local deadline, during the freeze (Redis cannot answer);
 * - no acquisition begun during the freeze succeeds before SIGCONT; failures are typed
 *   StoreUnavailableErrors;
 * - the stale release does not claim success ("unknown" or "expired", never "released");
 * - after SIGCONT, whatever the old holder had queued (extensions, its release) runs on the server
 *   and must not touch the next holder's key: it still holds the same token a while later.
 */
import { checkNoLostUpdates, checkNoOverlap, checkTypedAcquireErrors } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "redis-paused",
  number: "7",
  title: "lock server SIGSTOPped for 2 × expiry",
  expected: (p) =>
    `holder's lease lost ("expired") during the freeze, ≤ expiry + ${p.marginMs} ms after it; no grant to a call begun while frozen; ` +
    'stale release not "released"; next holder\'s key untouched after SIGCONT; 0 overlaps, 0 lost updates',
  observed: (results) => {
    const outcomes = [...new Set(results.map((r) => r.metrics?.releaseOutcome).filter(Boolean))].join("/");
    return (
      `lost ${range(results, "lostAfterPauseMs")} after SIGSTOP (${range(results, "lostAfterGrantMs")} after its grant); ` +
      `grants while frozen ${sum(results, "grantsWhileFrozen")}; typed errors ${sum(results, "typedErrors")}, other ` +
      `${sum(results, "otherErrors")}; stale release ${outcomes || "n/a"}; next grant ${range(results, "nextHolderAfterResumeMs")} ` +
      `after SIGCONT, its key kept ${sum(results, "successorKept")}/${results.length}; overlaps ${sum(results, "overlaps")}, ` +
      `lost updates ${sum(results, "lostUpdates")}`
    );
  },

  async run(ctx, p, _seed, checks) {
    const keys = ["k0"];
    const server = ctx.lockServers[0];
    const [victim] = await ctx.startWarmedUp(p.processes, keys, p);
    victim.send({ type: "arm", hold: { kind: "sleep", ms: p.victimHoldMs } });
    const entered = await victim.waitForNext((e) => e.type === "entered", 20_000, "holder inside");
    ctx.pool.broadcast({ type: "setHold", min: p.successorHoldMs, max: p.successorHoldMs }, [victim]);

    server.pause();
    const pausedAt = now();
    let resumedAt;
    try {
      await sleep(p.pauseFactor * p.expiry);
    } finally {
      resumedAt = now();
      server.resume();
    }
    const special = await victim.waitFor((e) => e.type === "special", 10 * p.expiry, "holder finished");
    const successor = await ctx.firstEvent(
      (e) => e.type === "acquired" && e.worker !== victim.id && e.t > resumedAt,
      10 * p.expiry,
      "next holder after SIGCONT",
    );
    const successorToken = await ctx.lockValue("k0");
    await sleep(p.settleMs); // anything the old holder queued has long run by now
    const tokenAfter = await ctx.lockValue("k0");
    const successorInside = `${successor.worker}.${successor.task}` in (await ctx.referee.holders("k0"));
    ctx.pool.broadcast({ type: "setHold", ...p.hold }, [victim]);
    await ctx.sectionsAfter(now(), p.warmup, 10 * p.expiry + p.successorHoldMs, "sections after the freeze");
    const history = await ctx.finish(checks, keys);

    const lostAfterPause = special.lostAt === undefined ? Number.NaN : special.lostAt - pausedAt;
    checks.equal("holder's lease lost with reason", special.lostReason, "expired");
    checks.add(
      "loss noticed during the freeze (from the local clock)",
      special.lostAt !== undefined && special.lostAt < resumedAt,
      "before SIGCONT",
      special.lostAt === undefined ? "never" : `${Math.round(special.lostAt - resumedAt)} ms from SIGCONT`,
    );
    checks.atMost(
      "loss within expiry + margin of the freeze",
      Math.round(lostAfterPause),
      p.expiry + p.marginMs,
      " ms",
    );
    // A call begun during the freeze cannot be answered before SIGCONT; one begun before it may
    // have had its answer before the freeze and recorded it later (a worker not scheduled for a
    // while on a loaded machine), so only calls begun during the freeze count.
    const frozenGrants = ctx.pool.events.filter(
      (e) => e.type === "acquired" && e.startedAt > pausedAt + p.clockSlackMs && e.t < resumedAt,
    );
    checks.equal("no grant while Redis is frozen", frozenGrants.length, 0);
    const acquireErrors = checkTypedAcquireErrors(checks, ctx.pool.events);
    checks.add(
      'stale release does not claim "released"',
      special.releaseOutcome !== "released",
      "unknown or expired",
      special.releaseOutcome,
    );
    checks.add(
      "next holder's key untouched by anything stale",
      successorToken !== null && tokenAfter === successorToken && successorInside,
      "same token, holder still inside",
      `token ${successorToken === null ? "absent" : tokenAfter === successorToken ? "same" : "changed"}, ` +
        `holder ${successorInside ? "still inside" : "gone"}`,
    );
    checkNoOverlap(checks, history);
    checkNoLostUpdates(checks, history);
    return {
      lostAfterPauseMs: lostAfterPause,
      lostAfterGrantMs: special.lostAt - special.acquiredAt,
      grantsWhileFrozen: frozenGrants.length,
      typedErrors: acquireErrors.typed,
      otherErrors: acquireErrors.other,
      releaseOutcome: special.releaseOutcome,
      nextHolderAfterResumeMs: successor.t - resumedAt,
      successorKept: tokenAfter === successorToken && successorInside ? 1 : 0,
      overlaps: history.overlaps.length,
      lostUpdates: history.lostUpdates,
      entered: entered.t,
    };
  },
};
