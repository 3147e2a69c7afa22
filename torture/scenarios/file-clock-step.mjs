/**
 * Scenario 24 — wall-clock steps and a dead holder, with FileLocker processes whose wall clocks
 * libfaketime steps by an hour (CLOCK_REALTIME only: the boot's monotonic clock, on which lock
 * deadlines are kept, does not move, as with an NTP step).
 *
 * 1. A live holder's clock steps back 1 h while it holds for `holdMs` (several extensions, each
 *    written with the stepped clock); `waiters` waiters wait meanwhile, one with its clock stepped
 *    forward 1 h, one back: nobody else may get the lock before the holder releases it (a waiter
 *    that did would enter the referee beside the holder: C1), then every waiter gets it in turn.
 * 2. A holder with a lease of `deadExpiry` whose clock stepped forward 1 h is SIGKILLed while the
 *    waiters wait: one of them must take over within `deadBoundMs` (its process is found gone), not
 *    after the lease nor after the hour.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkNoOverlap } from "../lib/checks.mjs";
import { FilePeer, monotonic } from "../lib/file-peers.mjs";
import { range, sum } from "../report.mjs";

const HOUR = 3_600_000;
/** The waiters' clocks: stepped forward, stepped back, then real ones. */
const WAITER_STEPS = ["+1h", "-1h"];

export default {
  id: "file-clock-step",
  number: "24",
  title: "FileLocker with wall clocks stepped by 1 h; a dead holder",
  lockNodes: () => 0,
  expected: (p) =>
    `holder's clock −1 h, waiters' ±1 h, held ${p.holdMs} ms (expiry ${p.expiry}): 0 waiters in before the ` +
    `release; holder (clock +1 h, lease ${p.deadExpiry} ms) SIGKILLed: taken over within ${p.deadBoundMs} ms; 0 overlaps`,
  observed: (results) =>
    `waiters in before the release ${sum(results, "early")}, holder's leases lost ${sum(results, "holderLost")}; ` +
    `kill → next holder ${range(results, "takeoverMs")}; overlaps ${sum(results, "overlaps")}`,

  async run(ctx, p, _seed, checks) {
    ctx.useFileStore();
    const clocks = mkdtempSync(join(tmpdir(), "globallock-torture-clocks-"));
    ctx.onTeardown(() => rmSync(clocks, { recursive: true, force: true }));
    const peers = [];
    const start = async (id, options) => {
      const peer = await FilePeer.start(ctx, id, options, clocks);
      peers.push(peer);
      return peer;
    };
    const keys = ["live", "dead"];
    try {
      const options = { expiry: p.expiry, backoff: { min: 10, max: p.backoffMax } };
      const waiters = [];
      for (let i = 0; i < p.waiters; i++) {
        const waiter = await start(`w${i}`, options);
        if (WAITER_STEPS[i] !== undefined) waiter.step(WAITER_STEPS[i]);
        waiters.push(waiter);
      }
      // 1. A live holder whose clock steps back.
      const holder = await start("h", options);
      const acquire = (peer, key) => {
        peer.send({ type: "acquire", key });
        return peer.next(
          (m) => m.key === key && (m.type === "acquired" || m.type === "acquireError"),
          30_000,
          `${peer.id} ${key}`,
        );
      };
      const release = (peer, key) => {
        peer.send({ type: "release", key });
        return peer.next((m) => m.type === "released" && m.key === key, 10_000, `${peer.id} release ${key}`);
      };
      await acquire(holder, "live");
      holder.step("-1h");
      const skews = await Promise.all([holder, ...waiters].map(async (peer) => (await peer.wallClock()) - Date.now()));
      checks.add(
        "wall clocks stepped (holder −1 h, waiters ±1 h)",
        skews[0] < -HOUR / 2 &&
          WAITER_STEPS.every(
            (step, i) => i >= waiters.length || Math.sign(skews[i + 1]) === (step.startsWith("+") ? 1 : -1),
          ),
        "stepped",
        skews.map((skew) => `${Math.round(skew / 60_000)} min`).join(", "),
      );
      /** Releases each waiter's lock as it gets it, in grant order; resolves to the grants in that order. */
      const drain = async (pending, key) => {
        const order = [];
        const left = pending.map((grant, i) => grant.then((m) => [i, m]));
        for (let n = 0; n < pending.length; n++) {
          const [first, message] = await Promise.race(left);
          left[first] = new Promise(() => undefined);
          order.push(message);
          await release(waiters[first], key);
        }
        return order;
      };
      const grants = waiters.map((waiter) => acquire(waiter, "live"));
      await new Promise((resolve) => setTimeout(resolve, p.holdMs));
      const releasedAt = monotonic();
      const early = waiters.filter((w) =>
        w.events.some((m) => m.type === "acquired" && m.key === "live" && m.t < releasedAt),
      );
      const holderLost = holder.events.filter((m) => m.type === "lost").length;
      await release(holder, "live");
      await drain(grants, "live");
      checks.equal("no waiter got the live holder's lock before its release", early.length, 0);
      checks.equal("the live holder's lease not lost", holderLost, 0);

      // 2. A holder whose clock stepped forward dies.
      const dead = await start("d", { ...options, expiry: p.deadExpiry });
      dead.step("+1h");
      await acquire(dead, "dead");
      const next = waiters.map((waiter) => acquire(waiter, "dead"));
      await new Promise((resolve) => setTimeout(resolve, p.backoffMax));
      // Out of the referee before the kill: its successor may enter within ms of it.
      await ctx.referee.forget("dead", "d");
      const killedAt = monotonic();
      dead.child.kill("SIGKILL");
      await dead.exited;
      const [granted] = await drain(next, "dead");
      const takeoverMs = granted?.type === "acquired" ? granted.t - killedAt : Number.POSITIVE_INFINITY;
      checks.atMost(
        "dead holder's lock taken over within deadBoundMs of the kill",
        Math.round(takeoverMs),
        p.deadBoundMs,
        " ms",
      );
      await Promise.all(peers.map((peer) => peer.stop()));
      const history = await ctx.finish(checks, keys);
      checkNoOverlap(checks, history);
      return { early: early.length, holderLost, takeoverMs, overlaps: history.overlaps.length };
    } finally {
      await Promise.all(peers.map((peer) => peer.stop()));
    }
  },
};
