/**
 * Scenario 11 — a Redlock quorum keeps a long-held lock through two minority restarts. Five
 * independent nodes; one holder sleeps for `holdFactor` × expiry while contenders keep trying.
 * Once the key is on all five nodes (a grant under contention may hold only a majority: a
 * contender's partial key sat on the others during the vote; the holder's next extension restores
 * it there), two nodes (seeded choice) are restarted empty; the parent waits, with direct
 * connections, until the key is back on all five nodes with the holder's token (the holder's next
 * extension finds a majority and puts the key back where it was gone); then two *other* nodes are
 * restarted empty, and again the parent waits for the key on all five. Without the restoration,
 * the second restart would leave the key on one node only (no majority: the lock would be lost and
 * a contender could take it); with it, a majority holds it throughout.
 *
 * What must hold: the holder's lease is never lost, no contender is granted the key while it
 * holds it, 0 overlaps and 0 lost updates; the key comes back on every restarted node, with the
 * holder's token, within `restoreBoundMs` of the restart. Reported: how long that took.
 */
import { checkNoLostUpdates, checkNoOverlap, checkTypedAcquireErrors } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { deriveSeed, Prng } from "../lib/prng.mjs";
import { leaseStatsOf } from "../lib/run-context.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "quorum-restore",
  number: "11",
  title: "5-node quorum: 2 restarted empty, key restored, 2 others restarted",
  lockNodes: () => 5,
  expected: (p) =>
    `holder sleeps ${p.holdFactor} × ${p.expiry} ms while ${p.contenders} processes wait; 2 nodes restarted empty, ` +
    `then (key back on all 5) 2 others: key restored with the holder's token ≤ ${p.restoreBoundMs} ms after each ` +
    "restart; lease never lost; 0 grants to contenders while it holds; 0 overlaps, 0 lost updates",
  observed: (results) =>
    `at entry the key was on ${range(results, "nodesAtEntry", "")} of 5 nodes (on all 5 after ` +
    `${range(results, "allFiveAfterEntryMs")}); key back on all 5 nodes ${range(results, "firstRestoreMs")} after the 1st restart, ` +
    `${range(results, "secondRestoreMs")} after the 2nd; nodes with the key after the 2nd restart ` +
    `${range(results, "nodesAfterSecondRestart", "")}/5; contenders' keys seen on restarted nodes ` +
    `${sum(results, "foreignValues")} times, the longest-lived for ${range(results, "longestForeignMs")}; ` +
    `lost ${sum(results, "lostLeases")}; contender grants during the section ` +
    `${sum(results, "grantsDuring")} (${sum(results, "failedAttempts")} typed failures, ${sum(results, "otherErrors")} ` +
    `other); ${sum(results, "extensions")} extensions, ${sum(results, "retries")} retried; overlaps ` +
    `${sum(results, "overlaps")}, lost updates ${sum(results, "lostUpdates")}`,

  async run(ctx, p, seed, checks) {
    const keys = ["k0"];
    const [holder] = await ctx.startWarmedUp(p.contenders + 1, keys, p, { fencing: false });
    const holdMs = p.holdFactor * p.expiry;
    holder.send({ type: "arm", hold: { kind: "sleep", ms: holdMs } });
    const entered = await holder.waitForNext((e) => e.type === "entered", 20_000, "long section entered");
    const token = await majorityValue(ctx);
    ctx.log(`holder ${entered.holderId} inside with token ${token}`);
    // Under contention a grant may hold only a majority (a contender's partial key sat on the other
    // nodes during the vote): restarting two of its nodes then would lose it (Redlock needs a node
    // to come back no sooner than a TTL, or with its data). Start from the key on all five.
    const initial = await waitForAll(ctx, p, token);
    ctx.log(`key on ${initial.nodesAtStart}/5 nodes at entry, on all 5 after ${Math.round(initial.ms ?? -1)} ms`);

    // Seeded choice of the two pairs of nodes to restart.
    const rng = new Prng(deriveSeed(seed, "nodes"));
    const order = [0, 1, 2, 3, 4];
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [order[i], order[j]] = [order[j], order[i]];
    }
    const first = order.slice(0, 2);
    const second = order.slice(2, 4);

    const foreign = [];
    const firstRound = await restartAndWait(ctx, p, first, token, foreign);
    const secondRound = await restartAndWait(ctx, p, second, token, foreign);
    const special = await holder.waitFor((e) => e.type === "special", holdMs + 20_000, "long section done");
    await ctx.sectionsAfter(special.releaseStartedAt, p.warmup, 20_000, "sections after the long one");
    const history = await ctx.finish(checks, keys);
    const stats = leaseStatsOf(ctx.pool.workers);

    checks.add(
      "the holder's token was on a majority at entry",
      token !== null,
      "a token on ≥ 3 nodes",
      token ?? "none",
    );
    checks.add(
      "the key was on all 5 nodes with the holder's token before the first restart",
      initial.ms !== undefined,
      `all 5 within ${p.restoreWaitMs} ms of entry`,
      initial.ms === undefined ? JSON.stringify(initial.last) : `after ${Math.round(initial.ms)} ms`,
    );
    for (const [label, round] of [
      ["first", firstRound],
      ["second", secondRound],
    ]) {
      checks.add(
        `${label} restart: key restored on the restarted nodes with the holder's token`,
        round.restoredMs !== undefined && round.restoredMs <= p.restoreBoundMs,
        `within ${p.restoreBoundMs} ms`,
        round.restoredMs === undefined
          ? `not after ${p.restoreWaitMs} ms: ${JSON.stringify(round.last)}`
          : `${Math.round(round.restoredMs)} ms${round.restoredMs > p.restoreBoundMs ? ` (blocked by ${JSON.stringify(round.blockedBy)})` : ""}`,
      );
    }
    checks.atLeast(
      "second restart: the key was still on a majority",
      secondRound.nodesWithKeyAfterRestart,
      3,
      " nodes",
    );
    checks.equal("holder's lease never lost", special.lostAt, undefined);
    checks.equal("holder's release", special.releaseOutcome, "released");
    checks.atLeast(
      "section lasted the whole hold",
      Math.round(special.releaseStartedAt - special.acquiredAt),
      holdMs,
      " ms",
    );
    const grantsDuring = ctx.pool.events.filter(
      (e) =>
        e.type === "acquired" && e.worker !== holder.id && e.t > special.acquiredAt && e.t < special.releaseStartedAt,
    );
    checks.equal("no contender granted during the section", grantsDuring.length, 0);
    const lost = ctx.pool.events.filter((e) => e.type === "lost");
    checks.equal("no lease lost", lost.length, 0);
    const acquireErrors = checkTypedAcquireErrors(checks, ctx.pool.events);
    checkNoOverlap(checks, history);
    checkNoLostUpdates(checks, history);
    return {
      nodesAtEntry: initial.nodesAtStart,
      allFiveAfterEntryMs: initial.ms,
      firstRestoreMs: firstRound.restoredMs,
      secondRestoreMs: secondRound.restoredMs,
      nodesAfterSecondRestart: secondRound.nodesWithKeyAfterRestart,
      foreignValues: foreign.length,
      longestForeignMs: Math.max(0, ...[firstRound, secondRound].map((r) => r.blockedBy?.ms ?? 0)),
      lostLeases: lost.length,
      grantsDuring: grantsDuring.length,
      failedAttempts: acquireErrors.typed,
      otherErrors: acquireErrors.other,
      extensions: stats.extensions,
      retries: stats.retries,
      overlaps: history.overlaps.length,
      lostUpdates: history.lostUpdates,
      restarted: `${first.join(",")} then ${second.join(",")}`,
    };
  },
};

/** The lock value held by a majority of the five nodes, or null (read directly). */
async function majorityValue(ctx) {
  const values = await Promise.all(ctx.lockAdmins.map((admin) => admin.get(`${ctx.prefix}k0`).catch(() => null)));
  const counts = new Map();
  for (const value of values) if (value !== null) counts.set(value, (counts.get(value) ?? 0) + 1);
  for (const [value, count] of counts) if (count >= 3) return value;
  return null;
}

/**
 * Restarts `nodes` empty (in parallel), then waits (see {@link waitForAll}) until every node has
 * `token` again. Also returns on how many nodes it was right after the restart.
 */
async function restartAndWait(ctx, p, nodes, token, foreign) {
  ctx.log(`restarting nodes ${nodes.join(", ")}`);
  await Promise.all(nodes.map((node) => ctx.lockServers[node].restart()));
  const round = await waitForAll(ctx, p, token, foreign);
  ctx.log(`key back on all nodes ${Math.round(round.ms ?? -1)} ms after the restart`);
  return {
    restoredMs: round.ms,
    nodesWithKeyAfterRestart: round.nodesAtStart,
    last: round.last,
    blockedBy: round.blockedBy,
  };
}

/**
 * Reads the key on all five nodes (directly) every `sampleMs` until every node has `token`, for at
 * most `restoreWaitMs` (longer than the bound the checks apply, so that the next step still starts
 * from the key on all five): { ms (undefined on timeout), nodesAtStart (nodes with the token at
 * the first read), last (the last read), blockedBy (the foreign value seen longest on one node) }.
 * Values other than the holder's token (a contender's partial key) are collected in `foreign`.
 */
async function waitForAll(ctx, p, token, foreign = []) {
  const startedAt = now();
  let nodesAtStart;
  const blockers = {};
  /** The foreign value that stayed longest on one node (a contender's partial key). */
  const longestBlocker = () =>
    Object.values(blockers)
      .map((b) => ({ node: b.node, value: b.value, ms: Math.round(b.to - b.from) }))
      .sort((a, b) => b.ms - a.ms)[0];
  for (;;) {
    const values = await Promise.all(
      ctx.lockAdmins.map((admin) => admin.get(`${ctx.prefix}k0`).catch((error) => `error: ${error.message}`)),
    );
    const t = now();
    nodesAtStart ??= values.filter((v) => v === token).length;
    for (const [node, value] of values.entries()) {
      if (value !== null && value !== token && !value.startsWith("error")) foreign.push({ node, value, t });
    }
    const last = values.map((v) => (v === token ? "holder" : v));
    for (const [node, value] of values.entries()) {
      if (value !== null && value !== token && !value.startsWith("error")) {
        const id = `${node}:${value}`;
        if (blockers[id] === undefined) blockers[id] = { node, value: value.slice(0, 8), from: t, to: t };
        else blockers[id].to = t;
      }
    }
    if (values.every((v) => v === token)) return { ms: t - startedAt, nodesAtStart, last, blockedBy: longestBlocker() };
    if (t - startedAt > p.restoreWaitMs) return { ms: undefined, nodesAtStart, last, blockedBy: longestBlocker() };
    await sleep(p.sampleMs);
  }
}
