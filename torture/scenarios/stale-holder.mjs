/**
 * The body shared by scenarios 4 and 5: a holder stops running while inside its critical section —
 * SIGSTOPped by the parent ("pause") or busy-waiting itself ("block") — for longer than its lease.
 * Its key expires, a contender (the successor) takes the lock, and the stale holder resumes still
 * inside its section. What must happen:
 *
 * - C1 sees the overlap, and every overlap involves the stale holder;
 * - the stale holder's lease `lost` signal fires as soon as it runs again;
 * - C3 refuses the stale holder's commit write (the successor's claim carried a higher token);
 * - the stale release reports "expired" or "taken" and leaves the successor's key alone.
 *
 * The successor is made to hold long (a "setHold" sent to every contender while the stale holder
 * is inside, so whoever takes over holds) so that its key is still there when the stale release
 * runs, and the check that it survives is meaningful.
 *
 * With read-write locks (the `READ_WRITE` variant, scenario 4c) the stale holder is a writer; the
 * contenders, readers and writers, all turn writers while it is inside, and the successor is the
 * first writer after it (readers queued before that took short holds): only a writer registers a
 * higher fencing token, which is what makes the stale commit refusable.
 */
import { checkNoStaleAccepted, overlapsNotExplainedBy, overlapsOnlyWith } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";

/** Plain locks (scenarios 4 and 5): any contender's acquisition is the succession. */
export const LOCK = { settings: {}, victimArm: {}, successorRole: undefined };

/**
 * @param {import("../lib/run-context.mjs").RunContext} ctx
 * @param {object} p parameters
 * @param {import("../lib/checks.mjs").Checks} checks
 * @param {"pause" | "block"} fault
 * @param {{ settings: object, victimArm: object, successorRole: string | undefined }} variant the
 *   workers' extra settings, what the stale holder's section takes (e.g. `{ role: "write" }`), and
 *   the role of the successor (its hold is made long, and other roles are turned into it)
 */
export async function runStaleHolder(ctx, p, checks, fault, variant = LOCK) {
  const keys = ["k0"];
  const expiry = p.expiry;
  const [victim] = await ctx.startWarmedUp(p.contenders + 1, keys, p, variant.settings);
  const role = variant.successorRole;

  const faultMs = p.faultFactor * expiry;
  victim.send({
    type: "arm",
    hold: {
      ...(fault === "pause"
        ? { kind: "sleep", ms: p.victimHoldMs }
        : { kind: "block", ms: faultMs, thenSleepMs: p.afterBlockMs }),
      ...variant.victimArm,
    },
  });
  const entered = await victim.waitForNext((e) => e.type === "entered", 20_000, "stale holder inside");
  // Whoever takes over next holds long: its key must still be there when the stale release runs.
  ctx.pool.broadcast({ type: "setHold", min: p.successorHoldMs, max: p.successorHoldMs, role }, [victim]);
  if (role !== undefined) ctx.pool.broadcast({ type: "setWriterShare", share: 1 }, [victim]);
  const isSuccession = (e) =>
    e.type === "acquired" && e.worker !== victim.id && e.t > entered.t && (role === undefined || e.role === role);

  let resumedAt;
  let successor;
  if (fault === "pause") {
    victim.signal("SIGSTOP");
    const stoppedAt = now();
    await sleep(faultMs);
    successor = ctx.pool.events.find(isSuccession);
    resumedAt = now();
    victim.signal("SIGCONT");
    checks.add(
      "a contender took over during the pause",
      successor !== undefined,
      "yes",
      successor ? `${successor.worker} after ${Math.round(successor.t - stoppedAt)} ms` : "no",
    );
  } else {
    successor = await ctx.firstEvent(isSuccession, faultMs + 5 * expiry, "a contender takes over");
  }
  const successorToken = await ctx.holdersValue("k0");
  const special = await victim.waitFor((e) => e.type === "special", 10 * expiry, "stale holder finished");
  await sleep(p.settleMs);
  const tokenAfter = await ctx.holdersValue("k0");
  const holdersAfter = await ctx.referee.holders("k0");
  const successorId = successor ? `${successor.worker}.${successor.task}` : undefined;
  const successorInside = successorId !== undefined && successorId in holdersAfter;

  ctx.pool.broadcast({ type: "setHold", ...p.hold, role }, [victim]);
  if (role !== undefined) ctx.pool.broadcast({ type: "setWriterShare", share: p.writerShare }, [victim]);
  await ctx.sectionsAfter(now(), p.warmup, 10 * expiry + p.successorHoldMs, "sections after the fault");
  const history = await ctx.finish(checks, keys);

  const insideMs = special.releaseStartedAt - special.acquiredAt;
  checks.atLeast("stale holder stayed inside through the fault", Math.round(insideMs), faultMs, " ms");
  checks.atLeast("C1 sees the overlap", history.overlaps.length, 1);
  checks.add(
    "every overlap involves the stale holder",
    overlapsOnlyWith(history, entered.holderId),
    `all involve ${entered.holderId}`,
    history.overlaps
      .map((o) => `${o.entrant.holder} entered with ${o.holders.map((h) => h.holder).join("+")}`)
      .join("; "),
  );
  const unexplained = overlapsNotExplainedBy(history, entered.holderId);
  checks.add(
    "without the stale holder, no overlap among the others",
    unexplained.length === 0,
    "0",
    unexplained.length === 0 ? "0" : `${unexplained.length} (first: ${JSON.stringify(unexplained[0])})`,
  );
  const runsAgainAt = fault === "pause" ? resumedAt : special.blockEndedAt;
  const lostDelay = special.lostAt === undefined ? Number.NaN : special.lostAt - runsAgainAt;
  checks.add("lease lost signal fired", special.lostAt !== undefined, "fired", special.lostReason ?? "never");
  checks.atMost(
    `lost fires as soon as the holder runs again (after ${fault === "pause" ? "SIGCONT" : "the busy-wait"})`,
    Math.round(lostDelay),
    p.lostBoundMs,
    " ms",
  );
  checks.atLeast("lost not before the holder ran again", Math.round(lostDelay), -p.clockSlackMs, " ms");
  checks.add(
    "C3 refuses the stale holder's commit write",
    special.commit?.stale === true && special.commit?.accepted === false,
    "stale and rejected",
    special.commit ? `stale ${special.commit.stale}, accepted ${special.commit.accepted}` : "no commit write",
  );
  checkNoStaleAccepted(checks, history);
  checks.oneOf("stale release outcome", special.releaseOutcome, ["expired", "taken"]);
  // The successor holds for successorHoldMs; on a starved machine the stale holder may finish only
  // after that, when the successor has already released. Its own release then tells whether its
  // key was intact: "released" (a stale release that deleted it would have made it "expired").
  const successorRelease = successor
    ? ctx.pool.events.find(
        (e) => e.type === "released" && e.worker === successor.worker && e.task === successor.task && e.t > successor.t,
      )
    : undefined;
  const keptInside = successorToken !== null && tokenAfter === successorToken && successorInside;
  const releasedIntact = successorRelease?.outcome === "released";
  checks.add(
    "successor's key survives the stale release",
    keptInside || releasedIntact,
    "same token, successor still inside (or its own release found its key intact)",
    `token ${successorToken === null ? "absent" : tokenAfter === successorToken ? "same" : "changed"}, ` +
      `successor ${successorInside ? "still inside" : `gone (its release: ${successorRelease?.outcome ?? "none seen"})`}`,
  );
  const errors = ctx.pool.events.filter((e) => e.type === "acquireError");
  checks.equal("no acquire error", errors.length, 0);
  return {
    overlaps: history.overlaps.length,
    lostDelayMs: lostDelay,
    lostReason: special.lostReason,
    insideMs,
    staleRejected: history.fenced.staleRejected,
    staleAccepted: history.fenced.staleAccepted,
    lostUpdates: history.lostUpdates,
    releaseOutcome: special.releaseOutcome,
    successorKept: tokenAfter === successorToken && successorInside ? 1 : 0,
  };
}

/** The observed column shared by scenarios 4 and 5. */
export function observeStaleHolder(results, { range, sum }) {
  const outcomes = [...new Set(results.map((r) => r.metrics?.releaseOutcome).filter(Boolean))].join("/");
  const reasons = [...new Set(results.map((r) => r.metrics?.lostReason).filter(Boolean))].join("/");
  return (
    `overlaps ${sum(results, "overlaps")} (all with the stale holder); lost ${range(results, "lostDelayMs")} after it ran ` +
    `again (${reasons || "n/a"}); stale writes ${sum(results, "staleRejected")} rejected / ${sum(results, "staleAccepted")} ` +
    `accepted; stale release ${outcomes || "n/a"}, successor key kept ${sum(results, "successorKept")}/${results.length}; ` +
    `lost updates (unfenced counter) ${sum(results, "lostUpdates")}`
  );
}
