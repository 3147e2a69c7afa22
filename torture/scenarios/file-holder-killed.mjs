/**
 * Scenario 18 — a FileLocker holder is SIGKILLed inside its critical section. Its lock file stays;
 * nobody may take it before the deadline written in it, and a waiter takes it over right after:
 * waiters sleep at most until the holder's deadline (read from the lock file), so the next holder
 * comes within expiry + one wake-up of the kill. The body of scenario 3 (`runHolderKilled`), with
 * the lease left read from the entry's deadline instead of a key's TTL.
 */
import { now } from "../lib/clock.mjs";
import { range, sum } from "../report.mjs";
import { runHolderKilled } from "./holder-killed.mjs";

export default {
  id: "file-holder-killed",
  number: "18",
  title: "FileLocker holder SIGKILLed while holding",
  lockNodes: () => 0,
  expected: (p) =>
    `next holder not before the lock file's deadline, within ${p.wakeUpMs} ms after it and within expiry + ` +
    `backoff.max + ${p.marginMs} ms (${p.expiry} + ${p.backoffMax} + ${p.marginMs}) of the kill; 0 overlaps`,
  observed: (results) =>
    `kill → next holder ${range(results, "delayMs")} (lease left at kill ${range(results, "pttlAtKill")}, ` +
    `taken over after the deadline ${range(results, "afterExpiryMs")}); overlaps ${sum(results, "overlaps")}`,

  async run(ctx, p, _seed, checks) {
    ctx.useFileStore();
    const metrics = await runHolderKilled(ctx, p, checks, {
      settings: { mode: "file", fencing: true },
      // What is left of the dead holder's lease: up to the deadline in its entry's name.
      leaseLeft: async (key) => (ctx.fileEntry(ctx.fileLockPath(key))?.deadline ?? 0) - now(),
    });
    checks.atMost(
      "next holder within one wake-up after the deadline",
      Math.round(metrics.afterExpiryMs),
      p.wakeUpMs,
      " ms",
    );
    return metrics;
  },
};
