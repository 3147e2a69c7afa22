/**
 * Scenario 18 — a FileLocker holder is SIGKILLed inside its critical section. Its lock file stays,
 * with a long lease left; a waiter finds the holder's process gone (its pid, of this host and boot)
 * and takes the lock over at once, long before the deadline written in it: waiters look again at
 * least every `backoff.max`, so the next holder comes within backoff.max + margin of the kill. The
 * body of scenario 3 (`runHolderKilled`), with the lease left read from the entry's deadline.
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
    `dead holder found: next holder before the lock file's deadline (expiry ${p.expiry} ms) and within ` +
    `backoff.max + ${p.marginMs} ms (${p.backoffMax} + ${p.marginMs}) of the kill; 0 overlaps`,
  observed: (results) =>
    `kill → next holder ${range(results, "delayMs")} (lease left at kill ${range(results, "pttlAtKill")}); ` +
    `overlaps ${sum(results, "overlaps")}`,

  async run(ctx, p, _seed, checks) {
    ctx.useFileStore();
    return runHolderKilled(ctx, p, checks, {
      settings: { mode: "file", fencing: true },
      // What is left of the dead holder's lease: up to the (wall-clock) deadline in its entry's name.
      leaseLeft: async (key) => (ctx.fileEntry(ctx.fileLockPath(key))?.deadline ?? 0) - now(),
      deadFound: true,
    });
  },
};
