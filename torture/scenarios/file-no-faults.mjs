/**
 * Scenario 17 — no faults with FileLocker: N processes × M sections on shared keys, the locks being
 * files in one directory of this host (no lock server; the referee is still a Redis server that no
 * lock touches). Same verdict as scenario 1: no overlap, no lost update, no stale write, no lost
 * lease, no error, every release "released", no lock file left.
 */
import noFaults, { runClean } from "./no-faults.mjs";

export default {
  id: "file-no-faults",
  number: "17",
  title: "no faults (FileLocker, separate processes, one host)",
  lockNodes: () => 0,
  expected: (p) =>
    `${p.processes} proc × ${p.sections} sections, ${p.keys} keys, expiry ${p.expiry} ms, lock files only: ` +
    "0 overlaps, 0 lost updates, 0 stale writes, 0 lost leases, 0 errors",
  observed: (results) => noFaults.observed(results),

  async run(ctx, p, _seed, checks) {
    ctx.useFileStore();
    const keys = Array.from({ length: p.keys }, (_, i) => `k${i}`);
    const settings = { mode: "file", fencing: true };
    return (await runClean(ctx, p, checks, { count: p.processes, keys, settings })).clean;
  },
};
