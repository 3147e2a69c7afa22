/**
 * Scenario 20 — stale-lock stealers racing: `stealers` processes, each with its own FileLocker on
 * one directory, attempt at the same epoch instant (busy-waiting for it) to take a lock whose
 * holder's deadline has passed (a holder that stopped extending: the parent's lease with its
 * entry's deadline moved into the past), `rounds` times. Exactly one must win each round; a
 * winner enters the referee (C1) and keeps the lock until every stealer has answered, so two
 * winners of a round would be two holders at once (and an overlap).
 * The rounds in which a loser had found the stale entry too (and lost the race to remove it) show
 * that the race was real.
 */
import { readdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { FileLocker } from "globallock";
import { checkNoOverlap } from "../lib/checks.mjs";
import { now } from "../lib/clock.mjs";
import { ask, forkPeer, stopPeers } from "../lib/peers.mjs";
import { sum } from "../report.mjs";

const STEALER = fileURLToPath(new URL("../file-stealer.mjs", import.meta.url));

export default {
  id: "file-stale-race",
  number: "20",
  title: "FileLocker stale-lock stealers racing",
  lockNodes: () => 0,
  expected: (p) =>
    `${p.stealers} processes × ${p.rounds} stale locks attempted at the same instant: exactly one winner per round, ` +
    "0 overlaps, 0 errors",
  observed: (results) =>
    `${sum(results, "rounds")} rounds: ${sum(results, "badRounds")} with ≠ 1 winner, overlaps ${sum(results, "overlaps")}, ` +
    `errors ${sum(results, "errors")}; a loser had found the stale entry too in ${sum(results, "realRaces")} rounds`,

  async run(ctx, p, _seed, checks) {
    const directory = ctx.useFileStore();
    const stealers = Array.from({ length: p.stealers }, (_, i) => forkPeer(STEALER, `s${i}`));
    const holder = new FileLocker({ directory, expiry: 60_000 });
    const keys = [];
    let badRounds = 0;
    let realRaces = 0;
    let errors = 0;
    try {
      await Promise.all(
        stealers.map((s) =>
          ask(
            s,
            {
              type: "start",
              directory,
              refereePort: ctx.refereeServer.port,
              namespace: ctx.namespace,
              id: s.id,
              holdMs: p.holdMs,
            },
            "ready",
          ),
        ),
      );
      for (let round = 0; round < p.rounds; round++) {
        const key = `stale-${round}`;
        keys.push(key);
        const lease = await holder.acquire(undefined, key, { autoExtend: false });
        const lock = holder.lockPath(key);
        // The entry's name is token.deadline(monotonic).deadline(wall).grant.pid…: both deadlines
        // into the past.
        for (const name of readdirSync(lock)) {
          const [token, _deadline, _wallDeadline, ...rest] = name.split(".");
          renameSync(join(lock, name), join(lock, [token, 1, 1, ...rest].join(".")));
        }
        const at = now() + p.startInMs;
        const replies = await Promise.all(stealers.map((s) => ask(s, { type: "race", key, at }, "raced")));
        const winners = replies.filter((r) => r.won).length;
        if (winners !== 1) badRounds += 1;
        if (replies.some((r) => r.lostRace)) realRaces += 1;
        errors += replies.filter((r) => r.error !== undefined).length;
        const winning = stealers.filter((_s, i) => replies[i].won);
        const released = await Promise.all(winning.map((s) => ask(s, { type: "release", key }, "released")));
        if (released.some((r) => r.outcome !== "released")) errors += 1;
        await lease.release();
      }
    } finally {
      await holder.close();
      await stopPeers(stealers);
    }
    const history = await ctx.finish(checks, keys);
    checks.equal("exactly one winner in every round", badRounds, 0);
    checks.atLeast("rounds in which two stealers found the stale entry (a real race)", realRaces, 1);
    checks.equal("no stealer error", errors, 0);
    checkNoOverlap(checks, history);
    return { rounds: p.rounds, badRounds, realRaces, errors, overlaps: history.overlaps.length };
  },
};
