/**
 * Scenario 19 — a FileLocker holder is SIGSTOPped inside its critical section for 3 × expiry, then
 * SIGCONTed: the body of scenario 4 (stale-holder.mjs) on lock files. Its lease runs out, a waiter
 * takes the lock over, and the stopped holder resumes inside its section: the overlap is expected
 * (C1 sees it); its `lost` must fire at once, its commit write must be refused by fencing, and its
 * release must leave the successor's lock file (same token) alone.
 */
import { range, sum } from "../report.mjs";
import { observeStaleHolder, runStaleHolder } from "./stale-holder.mjs";

/** Lock-file workers, fenced. */
const FILE_LOCK = { settings: { mode: "file", fencing: true }, victimArm: {}, successorRole: undefined };

export default {
  id: "file-holder-paused",
  number: "19",
  title: "FileLocker holder SIGSTOPped for 3 × expiry",
  lockNodes: () => 0,
  expected: (p) =>
    `overlap EXPECTED and seen by C1 (only with the paused holder); lost fires ≤ ${p.lostBoundMs} ms after SIGCONT; ` +
    `every stale fenced write rejected; stale release "expired"/"taken", successor's lock file kept`,
  observed: (results) => observeStaleHolder(results, { range, sum }),
  run: (ctx, p, _seed, checks) => {
    ctx.useFileStore();
    return runStaleHolder(ctx, p, checks, "pause", FILE_LOCK);
  },
};
