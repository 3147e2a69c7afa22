/**
 * Scenario 2 — a critical section that lasts 5 × expiry. The holder sleeps (its event loop is
 * free), so the sweeper keeps extending the lease: the key stays in Redis with the same token and
 * a TTL never above expiry, the lease is never lost, and contenders, who keep trying, never get in.
 */
import { checkNoLostUpdates, checkNoOverlap } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { holderToken } from "../lib/run-context.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "long-section",
  number: "2",
  title: "long critical section (5 × expiry)",
  expected: (p) =>
    `holder sleeps ${p.holdFactor} × ${p.expiry} ms while ${p.contenders} processes wait: key kept (same token, ` +
    "TTL ≤ expiry) by the sweeper, lease never lost, no contender gets it, 0 overlaps",
  observed: (results) =>
    `section ${range(results, "sectionMs")}, ${sum(results, "samples")} key samples, ${sum(results, "tokenChanges")} token ` +
    `changes / absences, max TTL ${range(results, "maxPttl")}, contender grants during it ${sum(results, "grantsDuring")}, ` +
    `lost ${sum(results, "lostLeases")}, overlaps ${sum(results, "overlaps")}`,

  async run(ctx, p, _seed, checks) {
    const keys = ["k0"];
    const [holder] = await ctx.startWarmedUp(p.contenders + 1, keys, p);
    const holdMs = p.holdFactor * p.expiry;
    holder.send({ type: "arm", hold: { kind: "sleep", ms: holdMs } });
    await holder.waitForNext((e) => e.type === "entered", 20_000, "long section entered");

    // Sample the lock key (value and TTL) until the holder reports the end of its section.
    const samples = [];
    let finished = false;
    const done = holder
      .waitForNext((e) => e.type === "special", holdMs + 20_000, "long section done")
      .finally(() => {
        finished = true;
      });
    done.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
    while (!finished) {
      const [[, value], [, pttl]] = await ctx.lockAdmins[0]
        .multi()
        .get(`${ctx.prefix}k0`)
        .pttl(`${ctx.prefix}k0`)
        .exec();
      samples.push({ t: now(), value: holderToken(value), pttl });
      await sleep(p.sampleMs);
    }
    const special = await done;
    const during = samples.filter((s) => s.t > special.acquiredAt && s.t < special.releaseStartedAt - 5);
    const token = during[0]?.value;
    const tokenChanges = during.filter((s) => s.value === null || s.value !== token).length;
    const maxPttl = Math.max(...during.map((s) => s.pttl));
    const grantsDuring = ctx.pool.events.filter(
      (e) =>
        e.type === "acquired" && e.worker !== holder.id && e.t > special.acquiredAt && e.t < special.releaseStartedAt,
    );
    await ctx.sectionsAfter(special.releaseStartedAt, p.warmup, 20_000, "sections after the long one");
    const history = await ctx.finish(checks, keys);

    const sectionMs = special.releaseStartedAt - special.acquiredAt;
    checks.atLeast("section lasted the whole hold", Math.round(sectionMs), holdMs, " ms");
    checks.atLeast("key sampled during the section", during.length, Math.floor(holdMs / p.sampleMs / 2));
    checks.add(
      "key present with the same token throughout",
      token !== null && token !== undefined && tokenChanges === 0,
      "0 changes or absences",
      `${tokenChanges} of ${during.length} samples`,
    );
    checks.atMost("TTL never above expiry (a lease, renewed)", maxPttl, p.expiry, " ms");
    checks.equal("lease never lost", special.lostAt, undefined);
    checks.equal("no contender granted during the section", grantsDuring.length, 0);
    checkNoOverlap(checks, history);
    checkNoLostUpdates(checks, history);
    const errors = ctx.pool.events.filter((e) => e.type === "acquireError");
    checks.equal("no acquire error", errors.length, 0);
    return {
      sectionMs,
      samples: during.length,
      tokenChanges,
      maxPttl,
      grantsDuring: grantsDuring.length,
      lostLeases: ctx.pool.events.filter((e) => e.type === "lost").length,
      overlaps: history.overlaps.length,
    };
  },
};
