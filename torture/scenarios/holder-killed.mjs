/**
 * Scenario 3 — the holder is SIGKILLed inside its critical section. Its lock is not released; it
 * expires. The next holder must get the lock after the key's remaining TTL (never before: that
 * would be an overlap) and within one safety-net wake-up after it (`backoff.max`), since no release
 * message is ever published.
 */
import { checkNoLostUpdates, checkNoOverlap } from "../lib/checks.mjs";
import { now } from "../lib/clock.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "holder-killed",
  number: "3",
  title: "holder SIGKILLed while holding",
  expected: (p) =>
    `next holder after the key's remaining TTL and ≤ expiry + backoff.max + ${p.marginMs} ms ` +
    `(${p.expiry} + ${p.backoffMax} + ${p.marginMs}) after the kill; 0 overlaps`,
  observed: (results) =>
    `kill → next holder ${range(results, "delayMs")} (TTL left at kill ${range(results, "pttlAtKill")}, ` +
    `wake-up after expiry ${range(results, "afterExpiryMs")}); overlaps ${sum(results, "overlaps")}`,

  run: (ctx, p, _seed, checks) =>
    runHolderKilled(ctx, p, checks, {
      // What is left of the dead holder's lease: its key's TTL.
      leaseLeft: (key) => ctx.lockAdmins[0].pttl(`${ctx.prefix}${key}`),
    }),
};

/**
 * The body of scenarios 3 and 18: a holder is SIGKILLed inside its section; `leaseLeft(key)` reads
 * how long its lock still has (ms; ≤ 0 when there is none) right after the kill; `settings` are the
 * workers' extra settings. Checks that the next holder comes after that and within
 * expiry + backoff.max + margin of the kill — or, with `deadFound` (a store that sees the holder's
 * process is gone), before that and within backoff.max + margin of the kill; resolves to the
 * metrics and the next holder's delay after the expiry (`afterExpiryMs`, negative when before it).
 */
export async function runHolderKilled(ctx, p, checks, { leaseLeft, settings = {}, deadFound = false }) {
  const keys = ["k0"];
  const [victim] = await ctx.startWarmedUp(p.contenders + 1, keys, p, settings);
  victim.send({ type: "arm", hold: { kind: "sleep", ms: 60_000 } });
  const entered = await victim.waitForNext((e) => e.type === "entered", 20_000, "victim inside");

  victim.killedOnPurpose = true;
  let pttl;
  let expiresAt;
  if (deadFound) {
    // The successor may come within ms of the kill: the lease and the referee are settled first
    // (the victim sleeps inside its section meanwhile, doing nothing).
    pttl = await leaseLeft(entered.key);
    expiresAt = now() + pttl;
    await ctx.referee.forget(entered.key, entered.holderId);
  }
  const killAt = now();
  victim.signal("SIGKILL");
  await victim.exited;
  if (!deadFound) {
    pttl = await leaseLeft(entered.key);
    expiresAt = now() + pttl;
    // The dead holder never leaves the referee by itself; its lock still keeps everyone out.
    await ctx.referee.forget(entered.key, entered.holderId);
  }

  const next = await ctx.firstEvent(
    (e) => e.type === "acquired" && e.worker !== victim.id && e.t > killAt,
    p.expiry * 10,
    "next holder after the kill",
  );
  await ctx.sectionsAfter(next.t, p.warmup, 20_000, "sections after the kill");
  const history = await ctx.finish(checks, keys);

  const delayMs = next.t - killAt;
  const bound = p.expiry + p.backoffMax + p.marginMs;
  checks.add("killed holder's key still there after the kill", pttl > 0, "TTL > 0", `${Math.round(pttl)} ms`);
  if (deadFound) {
    checks.atMost(
      "next holder within backoff.max + margin (dead holder found)",
      Math.round(delayMs),
      p.backoffMax + p.marginMs,
      " ms",
    );
    checks.atLeast("next holder before the lease ran out", Math.round(expiresAt - next.t), 1, " ms");
  } else {
    checks.atLeast("next holder not before the key expired", Math.round(next.t - expiresAt), -p.clockSlackMs, " ms");
    checks.atMost("next holder within expiry + backoff.max + margin", Math.round(delayMs), bound, " ms");
  }
  checkNoOverlap(checks, history);
  checkNoLostUpdates(checks, history);
  const errors = ctx.pool.events.filter((e) => e.type === "acquireError");
  checks.equal("no acquire error", errors.length, 0);
  return {
    delayMs,
    pttlAtKill: pttl,
    afterExpiryMs: next.t - expiresAt,
    overlaps: history.overlaps.length,
  };
}
