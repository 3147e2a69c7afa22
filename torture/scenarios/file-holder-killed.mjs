/**
 * Scenario 18 — a FileLocker holder is SIGKILLed inside its critical section. Its lock file stays;
 * nobody may take it before the deadline written in it, and a waiter takes it over right after:
 * waiters sleep at most until the holder's deadline (read from the lock file), so the next holder
 * comes within expiry + one wake-up of the kill.
 */
import { checkNoLostUpdates, checkNoOverlap } from "../lib/checks.mjs";
import { now } from "../lib/clock.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "file-holder-killed",
  number: "18",
  title: "FileLocker holder SIGKILLed while holding",
  lockNodes: () => 0,
  expected: (p) =>
    `next holder not before the lock file's deadline, within ${p.wakeUpMs} ms after it and within expiry + ` +
    `backoff.max + ${p.marginMs} ms (${p.expiry} + ${p.backoffMax} + ${p.marginMs}) of the kill; 0 overlaps`,
  observed: (results) =>
    `kill → next holder ${range(results, "delayMs")} (lease left at kill ${range(results, "leftAtKill")}, ` +
    `taken over after the deadline ${range(results, "afterExpiryMs")}); overlaps ${sum(results, "overlaps")}`,

  async run(ctx, p, _seed, checks) {
    ctx.useFileStore();
    const keys = ["k0"];
    const [victim] = await ctx.startWarmedUp(p.contenders + 1, keys, p, { mode: "file", fencing: true });
    victim.send({ type: "arm", hold: { kind: "sleep", ms: 60_000 } });
    const entered = await victim.waitForNext((e) => e.type === "entered", 20_000, "victim inside");

    victim.killedOnPurpose = true;
    const killAt = now();
    victim.signal("SIGKILL");
    await victim.exited;
    const entry = ctx.fileEntry(ctx.fileLockPath(entered.key));
    const expiresAt = entry?.deadline ?? Number.NaN;
    // The dead holder never leaves the referee by itself; its lock file still keeps everyone out.
    await ctx.referee.forget(entered.key, entered.holderId);

    const next = await ctx.firstEvent(
      (e) => e.type === "acquired" && e.worker !== victim.id && e.t > killAt,
      p.expiry * 10,
      "next holder after the kill",
    );
    await ctx.sectionsAfter(next.t, p.warmup, 20_000, "sections after the kill");
    const history = await ctx.finish(checks, keys);

    const delayMs = next.t - killAt;
    checks.add(
      "killed holder's lock file still there after the kill",
      entry !== null && expiresAt > killAt,
      "an entry with a deadline ahead",
      entry === null ? "none" : `deadline ${Math.round(expiresAt - killAt)} ms ahead`,
    );
    checks.atLeast(
      "next holder not before the lock's deadline",
      Math.round(next.t - expiresAt),
      -p.clockSlackMs,
      " ms",
    );
    checks.atMost(
      "next holder within one wake-up after the deadline",
      Math.round(next.t - expiresAt),
      p.wakeUpMs,
      " ms",
    );
    checks.atMost(
      "next holder within expiry + backoff.max + margin",
      Math.round(delayMs),
      p.expiry + p.backoffMax + p.marginMs,
      " ms",
    );
    checkNoOverlap(checks, history);
    checkNoLostUpdates(checks, history);
    const errors = ctx.pool.events.filter((e) => e.type === "acquireError");
    checks.equal("no acquire error", errors.length, 0);
    return {
      delayMs,
      leftAtKill: expiresAt - killAt,
      afterExpiryMs: next.t - expiresAt,
      overlaps: history.overlaps.length,
    };
  },
};
