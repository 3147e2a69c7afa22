/**
 * Scenario 22 — bursts that must not make a healthy Redis read as down: `processes` processes, each
 * with `lockers` RedisLockers on their own connections, fire `calls` concurrent tryAcquire calls
 * each on one key at the same epoch instant (busy-waiting for it), `rounds` times, the expiry
 * taking turns (the default 30 s, and 2 s: a 500 ms command timeout). Before issue #17 such
 * a burst ended with no winner and thousands of "did not answer within 500 ms": the timeout check
 * ran before Node read the answers that had been waiting in the socket while the burst was being
 * sent. Every round must have exactly one winner across all processes, still holding its lease
 * when its process reports, the rest `false`, and no error; the winner's release finds it
 * "released".
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { track } from "../lib/cleanup.mjs";
import { now, within } from "../lib/clock.mjs";
import { Prng } from "../lib/prng.mjs";
import { range, sum } from "../report.mjs";

const BURSTER = fileURLToPath(new URL("../burster.mjs", import.meta.url));

/** The total of one field over the processes' replies. */
const total = (replies, field) => replies.reduce((sum, reply) => sum + reply[field], 0);

export default {
  id: "burst",
  number: "22",
  title: "bursts of concurrent tryLock from many processes on one key",
  expected: (p) =>
    `${p.processes} proc × ${p.lockers} lockers × ${p.calls} calls at the same instant on one key, ${p.rounds} rounds ` +
    `(expiry ${p.expiries.join(" or ")} ms): exactly one winner per round, holding, the rest false, 0 errors`,
  observed: (results) =>
    `${sum(results, "rounds")} rounds of ${range(results, "callsPerRound", "")} calls: ${sum(results, "badRounds")} with ≠ 1 ` +
    `winner, winners not holding ${sum(results, "notHolding")}, errors ${sum(results, "errors")}` +
    `${results.find((r) => r.metrics?.firstError) ? ` (${results.find((r) => r.metrics?.firstError).metrics.firstError})` : ""}, ` +
    `releases not "released" ${sum(results, "badReleases")}; a process's burst took ${range(results, "burstMs")}`,

  async run(ctx, p, seed, checks) {
    const first = new Prng(seed).int(0, p.expiries.length - 1);
    const bursters = Array.from({ length: p.processes }, (_, i) => {
      const child = fork(BURSTER, [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
      track(child);
      return { id: `b${i}`, child, exited: new Promise((done) => child.once("exit", done)) };
    });
    const ask = (burster, message, type, ms = 60_000) =>
      within(
        new Promise((resolve) => {
          const onMessage = (reply) => {
            if (reply.type !== type) return;
            burster.child.off("message", onMessage);
            resolve(reply);
          };
          burster.child.on("message", onMessage);
          burster.child.send(message);
        }),
        ms,
        `${burster.id} ${type}`,
      );
    let badRounds = 0;
    let notHolding = 0;
    let errors = 0;
    let badReleases = 0;
    let firstError;
    let burstMsMax = 0;
    const keys = [];
    try {
      const start = { type: "start", port: ctx.lockServers[0].port, prefix: ctx.prefix, lockers: p.lockers };
      await Promise.all(bursters.map((b) => ask(b, { ...start, id: b.id }, "ready")));
      for (let round = 0; round < p.rounds; round++) {
        const key = `burst-${round}`;
        keys.push(key);
        // Every expiry in turn, from a seeded first one.
        const expiry = p.expiries[(first + round) % p.expiries.length];
        const at = now() + p.startInMs;
        const replies = await Promise.all(
          bursters.map((b) => ask(b, { type: "burst", key, at, calls: p.calls, expiry }, "burst")),
        );
        const winners = total(replies, "winners");
        if (winners !== 1) badRounds += 1;
        notHolding += winners - total(replies, "holding");
        errors += total(replies, "errors");
        firstError ??= replies.find((r) => r.firstError)?.firstError;
        burstMsMax = Math.max(burstMsMax, ...replies.map((r) => r.ms));
        const released = await Promise.all(bursters.map((b) => ask(b, { type: "release", key }, "released")));
        badReleases += released.flatMap((r) => r.outcomes).filter((outcome) => outcome !== "released").length;
        ctx.log(`round ${round}: expiry ${expiry}, ${winners} winner(s), ${total(replies, "errors")} errors`);
      }
    } finally {
      for (const b of bursters) if (b.child.connected) b.child.send({ type: "stop" });
      await within(Promise.all(bursters.map((b) => b.exited)), 10_000, "bursters exit").catch(() => undefined);
    }
    await ctx.finish(checks, keys);
    checks.equal("exactly one winner in every round", badRounds, 0);
    checks.equal("every winner still holding when its process reported", notHolding, 0);
    checks.equal("no error from a healthy server", errors, 0);
    checks.equal('every winner\'s release "released"', badReleases, 0);
    return {
      rounds: p.rounds,
      callsPerRound: p.processes * p.calls,
      badRounds,
      notHolding,
      errors,
      firstError,
      badReleases,
      burstMs: burstMsMax,
    };
  },
};
