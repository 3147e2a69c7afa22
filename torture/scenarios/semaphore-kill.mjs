/**
 * Scenario 14 — a semaphore holder SIGKILLed while it holds every permit. Its permits are not
 * released: its entry in the key's holder set expires. Nobody may get a permit before that (it
 * would exceed the limit), and the waiters must get them back within one safety-net wake-up
 * (`backoff.max`) after it, since no release is ever published. The victim takes all `limit`
 * permits (an armed weight), so the next grant to anyone needs the dead holder's permits.
 */
import { checkNoOverlap } from "../lib/checks.mjs";
import { now } from "../lib/clock.mjs";
import { range, sum } from "../report.mjs";
import { semaphoreSettings } from "./counted.mjs";

/**
 * The holders of `key`'s permits and the ms each has left, by the lock server's clock, read in one
 * transaction; `sentAt`: when it was sent (the server read its clock after that, so a deadline is
 * no earlier than `sentAt` + what it had left).
 */
async function permitsLeft(ctx, key) {
  const sentAt = now();
  const [[, time], [, flat]] = await ctx.lockAdmins[0]
    .multi()
    .time()
    .zrange(`${ctx.prefix}${key}`, 0, -1, "WITHSCORES")
    .exec();
  const serverMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const holders = [];
  for (let i = 0; i < flat.length; i += 2) {
    // Members starting with ":" are the queue's marks (see src/redis/permit-scripts.ts), not holders.
    if (!flat[i].startsWith(":")) holders.push({ member: flat[i], leftMs: Number(flat[i + 1]) - serverMs });
  }
  return { sentAt, holders };
}

export default {
  id: "semaphore-kill",
  number: "14",
  title: "semaphore holder of every permit SIGKILLed",
  expected: (p) =>
    `limit ${p.limit}; next grant after the dead holder's permits expired and ≤ expiry + backoff.max + ` +
    `${p.marginMs} ms (${p.expiry} + ${p.backoffMax} + ${p.marginMs}) after the kill; limit never exceeded`,
  observed: (results) =>
    `kill → next grant ${range(results, "delayMs")} (permits' lease left at kill ${range(results, "leftAtKill")}, ` +
    `grant after they expired ${range(results, "afterExpiryMs")}); limit exceeded ${sum(results, "overlaps")} times; ` +
    `${sum(results, "sectionsAfter")} sections after, most permits in use ${range(results, "maxPermits", "")}`,

  async run(ctx, p, _seed, checks) {
    const keys = ["k0"];
    const [victim] = await ctx.startWarmedUp(p.contenders + 1, keys, p, semaphoreSettings(p));
    victim.send({ type: "arm", hold: { kind: "sleep", ms: 60_000, weight: p.limit } });
    const entered = await victim.waitForNext((e) => e.type === "entered", 20_000, "victim inside");

    victim.killedOnPurpose = true;
    const killAt = now();
    victim.signal("SIGKILL");
    await victim.exited;
    const { sentAt, holders } = await permitsLeft(ctx, entered.key);
    const leftMs = Math.max(...holders.map((h) => h.leftMs));
    const expiresAt = sentAt + leftMs;
    // The dead holder never leaves the referee by itself; its permits still keep everyone out.
    await ctx.referee.forget(entered.key, entered.holderId);

    const next = await ctx.firstEvent(
      (e) => e.type === "acquired" && e.worker !== victim.id && e.t > killAt,
      p.expiry * 10,
      "next grant after the kill",
    );
    const after = now();
    await ctx.sectionsAfter(next.t, p.warmup, 20_000, "sections after the kill");
    const sectionsAfter = ctx.pool.events.filter((e) => e.type === "released" && e.t > next.t).length;
    const history = await ctx.finish(checks, keys);

    const delayMs = next.t - killAt;
    const bound = p.expiry + p.backoffMax + p.marginMs;
    checks.add(
      "the victim held every permit, alone, at the kill",
      entered.weight === p.limit && holders.length === 1 && holders[0].member.endsWith(`.${p.limit}`) && leftMs > 0,
      `weight ${p.limit}, 1 holder (member of weight ${p.limit}), lease left > 0`,
      `weight ${entered.weight}, ${holders.length} holder(s) (${holders.map((h) => h.member).join(", ")}), lease left ${leftMs} ms`,
    );
    checks.atLeast(
      "next grant not before the dead holder's permits expired",
      Math.round(next.t - expiresAt),
      -p.clockSlackMs,
      " ms",
    );
    checks.atMost("next grant within expiry + backoff.max + margin", Math.round(delayMs), bound, " ms");
    checkNoOverlap(checks, history, `C1 permits in use never above the limit (${p.limit})`);
    checks.atLeast("sections go on after the kill", sectionsAfter, p.warmup);
    const errors = ctx.pool.events.filter((e) => e.type === "acquireError");
    checks.equal("no acquire error", errors.length, 0);
    ctx.log(`next grant ${Math.round(delayMs)} ms after the kill (${Math.round(after - killAt)} ms observed)`);
    return {
      delayMs,
      leftAtKill: leftMs,
      afterExpiryMs: next.t - expiresAt,
      overlaps: history.overlaps.length,
      sectionsAfter,
      maxPermits: history.peaks.permits ?? 0,
    };
  },
};
