/**
 * Scenario 16 — a writer of a `RedisReadWriteLocker` (fencing on write leases) is SIGSTOPped inside
 * its critical section for 3 × expiry, then SIGCONTed. The contenders read and write; while it is
 * inside they all turn writers and the next writer holds long. Overlap is expected (readers, then
 * that writer, get in while it is frozen): see stale-holder.mjs for what must hold anyway — C1
 * sees it, only with the stale writer; its `lost` fires on SIGCONT; its commit write is stale and
 * refused; its release leaves the next writer's holding alone.
 */
import { range, sum } from "../report.mjs";
import { readWriteSettings } from "./counted.mjs";
import { observeStaleHolder, runStaleHolder } from "./stale-holder.mjs";

export default {
  id: "read-write-stop",
  number: "16",
  title: "read-write: writer SIGSTOPped for 3 × expiry (fenced write leases)",
  expected: (p) =>
    `overlap EXPECTED and seen by C1 (only with the paused writer); lost fires ≤ ${p.lostBoundMs} ms after SIGCONT; ` +
    `every stale fenced write rejected; stale release "expired"/"taken", next writer's holding kept`,
  observed: (results) => observeStaleHolder(results, { range, sum }),
  run: (ctx, p, _seed, checks) =>
    runStaleHolder(ctx, p, checks, "pause", {
      settings: readWriteSettings(p),
      victimArm: { role: "write" },
      successorRole: "write",
    }),
};
