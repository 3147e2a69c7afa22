/**
 * Scenario 4 — the holder is SIGSTOPped inside its critical section for 3 × expiry, then
 * SIGCONTed. Overlap is expected (a lease cannot stop a frozen holder); see stale-holder.mjs for
 * what must hold anyway.
 */
import { range, sum } from "../report.mjs";
import { observeStaleHolder, runStaleHolder } from "./stale-holder.mjs";

export default {
  id: "holder-paused",
  number: "4",
  title: "holder SIGSTOPped for 3 × expiry",
  expected: (p) =>
    `overlap EXPECTED and seen by C1 (only with the paused holder); lost fires ≤ ${p.lostBoundMs} ms after SIGCONT; ` +
    `every stale fenced write rejected; stale release "expired"/"taken", successor's key kept`,
  observed: (results) => observeStaleHolder(results, { range, sum }),
  run: (ctx, p, _seed, checks) => runStaleHolder(ctx, p, checks, "pause"),
};
