/**
 * Scenario 5 — the holder blocks its own event loop (a busy-wait) for 1.5 × expiry inside its
 * critical section: no timer, no extension, no I/O runs meanwhile. Then it finishes its section.
 * Same expectations as scenario 4 (see stale-holder.mjs).
 */
import { range, sum } from "../report.mjs";
import { observeStaleHolder, runStaleHolder } from "./stale-holder.mjs";

export default {
  id: "loop-blocked",
  number: "5",
  title: "event loop blocked 1.5 × expiry in the section",
  expected: (p) =>
    `overlap EXPECTED and seen by C1 (only with the blocked holder); lost fires ≤ ${p.lostBoundMs} ms after the ` +
    `busy-wait; every stale fenced write rejected; stale release "expired"/"taken", successor's key kept`,
  observed: (results) => observeStaleHolder(results, { range, sum }),
  run: (ctx, p, _seed, checks) => runStaleHolder(ctx, p, checks, "block"),
};
