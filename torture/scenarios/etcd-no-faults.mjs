/**
 * Scenario 25 — no faults with EtcdLocker: N processes × M sections on shared keys, each process
 * with its own `Etcd3` client on every member of a real 3-member etcd cluster, fencing on (tokens
 * are the entries' create revisions). Same verdict as scenario 1: no overlap, no lost update, no
 * stale write, no lost lease, no error, every release "released", no etcd key left. Without etcd
 * it passes with a single check that says SKIP and why.
 */
import { skippedObserved, skipWithoutEtcd } from "../lib/etcd-store.mjs";
import noFaults, { runClean } from "./no-faults.mjs";

export default {
  id: "etcd-no-faults",
  number: "25",
  title: "no faults (EtcdLocker, 3-member cluster, separate processes)",
  lockNodes: () => 0,
  expected: (p) =>
    `${p.processes} proc × ${p.sections} sections, ${p.keys} keys, expiry ${p.expiry} ms, ${p.members} etcd members: ` +
    "0 overlaps, 0 lost updates, 0 stale writes, 0 lost leases, 0 errors (SKIP without etcd)",
  observed: (results) => skippedObserved(results) ?? noFaults.observed(results),

  async run(ctx, p, _seed, checks) {
    const skipped = await skipWithoutEtcd(ctx, checks);
    if (skipped !== undefined) return skipped;
    await ctx.useEtcdStore(p.members);
    const keys = Array.from({ length: p.keys }, (_, i) => `k${i}`);
    const settings = { mode: "etcd", fencing: true };
    return (await runClean(ctx, p, checks, { count: p.processes, keys, settings })).clean;
  },
};
