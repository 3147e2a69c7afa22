/**
 * Scenario 26 — an EtcdLocker holder (fenced) is SIGSTOPped inside its critical section for
 * 3 × expiry, then SIGCONTed: the body of scenario 4 (stale-holder.mjs) on a 3-member etcd
 * cluster. No keepalive reaches etcd, so its lease expires there and its entry goes with it; a
 * waiter hears the delete and takes the lock, with a higher create revision as its token. The
 * stopped holder resumes still inside: the overlap is expected (C1 sees it); its `lost` must fire
 * at once, its commit write must be refused by fencing, and its release must leave the
 * successor's entry (same token) alone. Without etcd it passes with a single SKIP check.
 */
import { skippedObserved, skipWithoutEtcd } from "../lib/etcd-store.mjs";
import { range, sum } from "../report.mjs";
import { observeStaleHolder, runStaleHolder } from "./stale-holder.mjs";

/** EtcdLocker workers, fenced. */
const ETCD_LOCK = { settings: { mode: "etcd", fencing: true }, victimArm: {}, successorRole: undefined };

export default {
  id: "etcd-holder-paused",
  number: "26",
  title: "EtcdLocker holder SIGSTOPped for 3 × expiry",
  lockNodes: () => 0,
  expected: (p) =>
    `overlap EXPECTED and seen by C1 (only with the paused holder); lost fires ≤ ${p.lostBoundMs} ms after SIGCONT; ` +
    `every stale fenced write rejected; stale release "expired"/"taken", successor's etcd entry kept (SKIP without etcd)`,
  observed: (results) => skippedObserved(results) ?? observeStaleHolder(results, { range, sum }),
  async run(ctx, p, _seed, checks) {
    const skipped = await skipWithoutEtcd(ctx, checks);
    if (skipped !== undefined) return skipped;
    await ctx.useEtcdStore(p.members);
    return runStaleHolder(ctx, p, checks, "pause", ETCD_LOCK);
  },
};
