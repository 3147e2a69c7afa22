/**
 * Scenario 22 — bursts that must not make a healthy Redis read as down: `processes` processes, each
 * with `lockers` RedisLockers on their own connections, fire `calls` concurrent tryAcquire calls
 * each on one key at the same epoch instant (busy-waiting for it), `rounds` times, the expiry
 * taking turns (the default 30 s, and 2 s: a 500 ms command timeout). Before issue #17 such
 * a burst ended with no winner and thousands of "did not answer within 500 ms": the timeout check
 * ran before Node read the answers that had been waiting in the socket while the burst was being
 * sent. No round may see an error. With the default expiry a round has exactly one winner across
 * all processes, still holding its lease when its process reports, and its release finds it
 * "released". With 2 s a process's burst (10,000 calls, on 2 shared cores) can outlast the lease,
 * and with it a winner's lease (no lease survives a pause longer than itself): a round then needs
 * a winner, and never two holding at once (asked of every process once all have reported).
 */
import { fileURLToPath } from "node:url";
import { now } from "../lib/clock.mjs";
import { ask, forkPeer, stopPeers } from "../lib/peers.mjs";
import { Prng } from "../lib/prng.mjs";
import { range, sum } from "../report.mjs";

/** RedisLocker's default lease: the rounds whose winner must still hold when its process reports. */
const DEFAULT_EXPIRY = 30_000;

const BURSTER = fileURLToPath(new URL("../burster.mjs", import.meta.url));

/** The total of one field over the processes' replies. */
const total = (replies, field) => replies.reduce((sum, reply) => sum + reply[field], 0);

export default {
  id: "burst",
  number: "22",
  title: "bursts of concurrent tryLock from many processes on one key",
  expected: (p) =>
    `${p.processes} proc × ${p.lockers} lockers × ${p.calls} calls at the same instant on one key, ${p.rounds} rounds ` +
    `(expiry ${p.expiries.join(" or ")} ms in turn): 0 errors; default expiry exactly one winner, holding; ` +
    "short expiry a winner, never two holding at once",
  observed: (results) =>
    `${sum(results, "rounds")} rounds of ${range(results, "callsPerRound", "")} calls: ${sum(results, "badRounds")} failing ` +
    `their check, errors ${sum(results, "errors")}` +
    `${results.find((r) => r.metrics?.firstError) ? ` (${results.find((r) => r.metrics?.firstError).metrics.firstError})` : ""}, ` +
    `releases not "released" ${sum(results, "badReleases")}; a process's burst took ${range(results, "burstMs")}`,

  async run(ctx, p, seed, checks) {
    const first = new Prng(seed).int(0, p.expiries.length - 1);
    /** Per round of each kind: whether it met its check. */
    const defaultRounds = [];
    const shortRounds = [];
    const bursters = Array.from({ length: p.processes }, (_, i) => forkPeer(BURSTER, `b${i}`));
    let badRounds = 0;
    let errors = 0;
    let badReleases = 0;
    let firstError;
    let burstMsMax = 0;
    const keys = [];
    try {
      const start = { type: "start", port: ctx.lockServers[0].port, prefix: ctx.prefix, lockers: p.lockers };
      await Promise.all(bursters.map((b) => ask(b, { ...start, id: b.id }, "ready", 60_000)));
      for (let round = 0; round < p.rounds; round++) {
        const key = `burst-${round}`;
        keys.push(key);
        // Every expiry in turn, from a seeded first one.
        const expiry = p.expiries[(first + round) % p.expiries.length];
        const short = expiry < DEFAULT_EXPIRY;
        const at = now() + p.startInMs;
        const replies = await Promise.all(
          bursters.map((b) => ask(b, { type: "burst", key, at, calls: p.calls, expiry }, "burst", 60_000)),
        );
        const winners = total(replies, "winners");
        // Asked once every process has reported: leases held at the same time, or not.
        const statuses = await Promise.all(bursters.map((b) => ask(b, { type: "status", key }, "status", 60_000)));
        const holding = total(statuses, "holding");
        // The default lease outlasts the burst: one winner, holding. A short one may not (a burst
        // that keeps a process busy longer than the lease outlasts any lease): then a later call
        // can take the key after a winner's lease ran out, but never while one is held.
        const good = short
          ? winners >= 1 && holding <= 1
          : winners === 1 && holding === 1 && total(replies, "holding") === 1;
        if (!good) badRounds += 1;
        errors += total(replies, "errors");
        firstError ??= replies.find((r) => r.firstError)?.firstError;
        burstMsMax = Math.max(burstMsMax, ...replies.map((r) => r.ms));
        const released = await Promise.all(bursters.map((b) => ask(b, { type: "release", key }, "released", 60_000)));
        if (!short) badReleases += released.flatMap((r) => r.outcomes).filter((o) => o !== "released").length;
        ctx.log(
          `round ${round}: expiry ${expiry}, ${winners} winner(s), ${holding} holding, ${total(replies, "errors")} errors`,
        );
        (short ? shortRounds : defaultRounds).push(good);
      }
    } finally {
      await stopPeers(bursters);
    }
    await ctx.finish(checks, keys);
    checks.equal(
      "default expiry: exactly one winner in every round, still holding when its process reported",
      defaultRounds.filter((good) => !good).length,
      0,
    );
    checks.equal(
      "short expiry: a winner in every round, never two holding at once",
      shortRounds.filter((good) => !good).length,
      0,
    );
    checks.equal("no error from a healthy server", errors, 0);
    checks.equal('default expiry: every winner\'s release "released"', badReleases, 0);
    return {
      rounds: p.rounds,
      callsPerRound: p.processes * p.calls,
      badRounds,
      errors,
      firstError,
      badReleases,
      burstMs: burstMsMax,
    };
  },
};
