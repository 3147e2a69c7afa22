/**
 * Scenario 27 — kill -9 of the etcd leader under held locks. A 3-member etcd cluster; every worker
 * process has one `Etcd3` client on all three members and a fenced EtcdLocker; they contend for
 * two keys. After the warm-up one worker (the keeper) is armed to sleep `holdMs` inside its next
 * section; once it is inside, the parent SIGKILLs the member every member names as leader and
 * waits for the two left to elect a new one.
 *
 * What must hold: a new leader is elected (another member); there is no overlap except where a
 * holder's lease was reported lost (each overlap has a party whose `lost` fired in that very
 * section); the keeper's lock is either kept to the end (release "released") or reported lost —
 * never silently kept; fencing tokens keep rising (the first grant begun after the election is
 * above every grant before the kill; no token is granted twice on a key) and no stale write is
 * accepted; sections continue after the election with "released" releases; acquisitions fail only
 * with the typed StoreUnavailableError. Reported: the election time, what happened to the held
 * lock, leases lost, sections after. Without etcd it passes with a single SKIP check.
 */
import { checkNoLostUpdates, checkTypedAcquireErrors } from "../lib/checks.mjs";
import { now } from "../lib/clock.mjs";
import { skippedObserved, skipWithoutEtcd } from "../lib/etcd-store.mjs";
import { compareTokens } from "../lib/referee.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "etcd-leader-killed",
  number: "27",
  title: "etcd leader SIGKILLed under held locks (EtcdLocker, 3 members)",
  lockNodes: () => 0,
  expected: (p) =>
    `${p.processes} proc on 2 keys, expiry ${p.expiry} ms, a holder inside for ${p.holdMs} ms when the leader is ` +
    "SIGKILLed: a new leader; overlaps only with a holder whose lease was reported lost; the held lock kept " +
    '("released") or reported lost; tokens rise across the election, none granted twice, 0 stale writes accepted; ' +
    `≥ ${p.sectionsAfterElection} sections after the election; only typed errors (SKIP without etcd)`,
  observed: (results) => {
    const skipped = skippedObserved(results);
    if (skipped !== undefined) return skipped;
    const fates = [...new Set(results.map((r) => r.metrics?.keeperFate).filter(Boolean))].join(" / ");
    return (
      `new leader ${range(results, "electionMs")} after the kill; held lock: ${fates}; leases lost ` +
      `${sum(results, "leasesLost")}; overlaps ${sum(results, "overlaps")} (${sum(results, "unexplained")} without a ` +
      `lost lease); tokens rose ${sum(results, "tokensRose")}/${results.length}, granted twice ` +
      `${sum(results, "duplicateTokens")}; stale writes ${sum(results, "staleRejected")} rejected / ` +
      `${sum(results, "staleAccepted")} accepted; ${sum(results, "sectionsAfter")} sections after the election; ` +
      `typed errors ${sum(results, "typedErrors")}, other ${sum(results, "otherErrors")}`
    );
  },

  async run(ctx, p, _seed, checks) {
    const skipped = await skipWithoutEtcd(ctx, checks);
    if (skipped !== undefined) return skipped;
    const store = await ctx.useEtcdStore(p.members);
    const keys = ["k0", "k1"];
    const [keeper] = await ctx.startWarmedUp(p.processes, keys, p, { mode: "etcd", fencing: true });
    keeper.send({ type: "arm", hold: { kind: "sleep", ms: p.holdMs } });
    const keeperIn = await keeper.waitForNext((e) => e.type === "entered", 20_000, "holder inside");

    const oldLeader = await store.cluster.waitForLeader();
    const killAt = now();
    await store.cluster.kill(oldLeader);
    ctx.log(`leader ${oldLeader.name} killed`);
    const newLeader = await store.cluster.waitForLeader(p.electionWaitMs);
    const electedAt = now();
    ctx.log(`new leader ${newLeader.name} after ${Math.round(electedAt - killAt)} ms`);

    const keeperEnd = await keeper.waitFor((e) => e.type === "special", p.holdMs + 30_000, "holder finished");
    const releasedAfter = () =>
      ctx.pool.events.filter((e) => e.type === "released" && e.t > electedAt && e.outcome === "released");
    await ctx.pool
      .waitForEvent(() => releasedAfter().length >= p.sectionsAfterElection, 30_000, "sections after the election")
      .catch(() => undefined); // judged below
    const history = await ctx.finish(checks, keys);

    checks.add(
      "a new leader is elected (another member)",
      newLeader.name !== oldLeader.name,
      `not ${oldLeader.name}`,
      newLeader.name,
    );
    // Overlaps: each must have a party whose lease was reported lost during that section.
    const lostSections = new Set(
      ctx.pool.events.filter((e) => e.type === "lost").map((e) => `${e.worker}.${e.task}#${e.attempt}`),
    );
    const unexplained = history.overlaps.filter(
      (record) =>
        ![record.entrant, ...record.holders].some((party) => lostSections.has(`${party?.holder}#${party?.attempt}`)),
    );
    checks.add(
      "no overlap except with a holder whose lease was reported lost",
      unexplained.length === 0,
      "0 unexplained",
      `${unexplained.length} of ${history.overlaps.length}${unexplained[0] ? ` (first: ${JSON.stringify(unexplained[0])})` : ""}`,
    );
    if (history.overlaps.length === 0) checkNoLostUpdates(checks, history);
    const keptSilently = keeperEnd.lostAt === undefined && keeperEnd.releaseOutcome !== "released";
    checks.add(
      "the lock held across the kill is kept to the end or reported lost",
      !keptSilently,
      'lost, or released with "released"',
      keeperEnd.lostAt === undefined ? `kept, release ${keeperEnd.releaseOutcome}` : `lost (${keeperEnd.lostReason})`,
    );

    const acquired = ctx.pool.events.filter((e) => e.type === "acquired" && e.token !== undefined);
    const maxBefore = extremeToken(
      acquired.filter((e) => e.t < killAt),
      1,
    );
    const minAfter = extremeToken(
      acquired.filter((e) => e.startedAt > electedAt),
      -1,
    );
    const tokensRose = maxBefore !== undefined && minAfter !== undefined && compareTokens(minAfter, maxBefore) > 0;
    checks.add(
      "fencing tokens rise across the election",
      tokensRose,
      "first after > last before",
      `${maxBefore} → ${minAfter}`,
    );
    const seen = new Set();
    let duplicateTokens = 0;
    for (const event of acquired) {
      const id = `${event.key} ${event.token}`;
      if (seen.has(id)) duplicateTokens += 1;
      seen.add(id);
    }
    checks.equal("no fencing token granted twice on a key", duplicateTokens, 0);
    const after = releasedAfter().length;
    checks.atLeast("sections complete after the election", after, p.sectionsAfterElection);
    const errors = checkTypedAcquireErrors(checks, ctx.pool.events);
    const keeperFate =
      keeperEnd.lostAt === undefined
        ? `kept, release ${keeperEnd.releaseOutcome}`
        : `lost (${keeperEnd.lostReason}) ${Math.round(keeperEnd.lostAt - killAt)} ms after the kill, release ${keeperEnd.releaseOutcome}`;
    return {
      electionMs: electedAt - killAt,
      keeperFate,
      keeperEntered: keeperIn.t,
      leasesLost: lostSections.size,
      overlaps: history.overlaps.length,
      unexplained: unexplained.length,
      lostUpdates: history.lostUpdates,
      tokensRose: tokensRose ? 1 : 0,
      duplicateTokens,
      staleRejected: history.fenced.staleRejected,
      staleAccepted: history.fenced.staleAccepted,
      sectionsAfter: after,
      typedErrors: errors.typed,
      otherErrors: errors.other,
    };
  },
};

/** The highest (`sign` 1) or lowest (`sign` -1) token of `events`, or undefined when there is none. */
function extremeToken(events, sign) {
  let best;
  for (const { token } of events) if (best === undefined || compareTokens(token, best) * sign > 0) best = token;
  return best;
}
