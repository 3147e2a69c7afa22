/**
 * Scenario 23 — a burst on one key: `processes` FileLocker processes fire `calls` tryAcquire in all
 * (spread evenly) at one instant, with leases of `expiry` ms, on one key; the burst's file
 * operations must not starve the winner's extensions. Exactly one call wins, the winner keeps its
 * lease through the burst and `holdMs` more (it enters the referee: a second winner would be an
 * overlap), every other call gets `undefined`, none fails; the release says "released".
 */
import { checkNoOverlap } from "../lib/checks.mjs";
import { FilePeer, monotonic } from "../lib/file-peers.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "file-burst",
  number: "23",
  title: "FileLocker burst of tryAcquire on one key",
  lockNodes: () => 0,
  expected: (p) =>
    `${p.calls} tryAcquire from ${p.processes} processes at once, expiry ${p.expiry} ms: exactly 1 winner, ` +
    `its lease kept through the burst and ${p.holdMs} ms more, 0 errors, 0 overlaps`,
  observed: (results) =>
    `winners ${range(results, "winners", "")}, lost leases ${sum(results, "lost")}, errors ${sum(results, "errors")}, ` +
    `burst ${range(results, "burstMs")}, overlaps ${sum(results, "overlaps")}`,

  async run(ctx, p, _seed, checks) {
    ctx.useFileStore();
    const key = "burst";
    const peers = [];
    try {
      for (let i = 0; i < p.processes; i++) {
        peers.push(await FilePeer.start(ctx, `b${i}`, { expiry: p.expiry }));
      }
      const at = monotonic() + 100;
      const share = Math.ceil(p.calls / p.processes);
      const bursts = await Promise.all(
        peers.map((peer) => {
          const done = peer.next((m) => m.type === "burst", p.timeoutMs, `${peer.id} burst`);
          peer.send({ type: "burst", key, calls: share, at });
          return done;
        }),
      );
      const winners = bursts.reduce((n, b) => n + b.wins, 0);
      const errors = bursts.flatMap((b) => b.errors);
      const burstMs = Math.max(...bursts.map((b) => b.elapsedMs));
      await new Promise((resolve) => setTimeout(resolve, p.holdMs));
      const releases = await Promise.all(
        peers
          .filter((_peer, i) => bursts[i].wins > 0)
          .map((peer) => {
            const done = peer.next((m) => m.type === "released", 10_000, `${peer.id} release`);
            peer.send({ type: "release", key });
            return done;
          }),
      );
      const lost = peers.flatMap((peer) => peer.events.filter((m) => m.type === "lost"));
      // Closed and gone before the directory is checked: a live locker keeps spare attempt directories.
      await Promise.all(peers.map((peer) => peer.stop()));
      const history = await ctx.finish(checks, [key]);
      checks.equal("exactly one winner", winners, 1);
      checks.equal("no lease lost (extensions got through the burst)", lost.length, 0);
      checks.equal("no call failed", errors.length, 0);
      checks.add(
        "the winner's release says released",
        releases.length === 1 && releases[0].outcome === "released",
        "released",
        releases.map((r) => r.outcome).join(", ") || "no winner",
      );
      checkNoOverlap(checks, history);
      return { winners, lost: lost.length, errors: errors.length, burstMs, overlaps: history.overlaps.length };
    } finally {
      await Promise.all(peers.map((peer) => peer.stop()));
    }
  },
};
