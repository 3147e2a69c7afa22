/**
 * Scenario 12 — a Sentinel failover under held locks. A Sentinel group (master, one replica,
 * three Sentinels; down-after 500 ms) on loopback; every worker process builds one ioredis
 * Sentinel client (`new Redis({ sentinels, name })`) and a fenced RedisLocker on it. Worker w1
 * holds `k1`, a lock that reached the replica; worker w0 (the victim) holds `k0`, a lock that
 * deterministically did not; the other workers contend for `k0`. Then the master is SIGKILLed.
 *
 * Making the unreplicated lock deterministic: SIGSTOP alone is not enough — the master's
 * replication stream still lands in the stopped replica's socket buffer, and the replica applies
 * it on SIGCONT (tried: the key survives). So, with the contenders paused and w1's key confirmed
 * on the replica, the parent SIGSTOPs the replica, cuts the replication link on the master
 * (`CLIENT KILL TYPE replica`; the stopped replica cannot reconnect), lets the victim acquire `k0`
 * on the master, SIGKILLs the master, and SIGCONTs the replica, all within a few tens of ms. The
 * replica was unresponsive far less than down-after (500 ms), so the Sentinels see it healthy,
 * and as the only replica, with a link down for less than 10 × down-after, it is the one they
 * promote (checked: the new master is the replica's port). It never received the victim's key.
 *
 * What must hold: the Sentinels promote the replica; the victim's key is absent on the new master
 * and its lease is reported lost during its section (never silently kept), its release not
 * "released"; every lease held across the failover is either reported lost or kept its key to the
 * end ("released" on the new master); sections complete on the new master; fencing tokens keep
 * rising (the first grant after the failover has a higher token than any before it) and no stale
 * write is accepted (the victim's commit is refused); overlaps only involve the victim; only typed
 * errors, no unhandled rejection. Reported: failover time, what happened to each held lock.
 */
import { checkTypedAcquireErrors, overlapsOnlyWith } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { startSentinelGroup } from "../lib/redis-server.mjs";
import { compareTokens } from "../lib/referee.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "sentinel-failover",
  number: "12",
  title: "Sentinel failover: master SIGKILLed under held locks",
  lockNodes: () => 0,
  expected: () =>
    "replica promoted; the lock that never reached it is reported lost in its section (release not " +
    '"released"), every lock held across is lost-reported or kept with its key; sections complete on the new ' +
    "master; fencing tokens rise, 0 stale writes accepted; overlaps only with the lost holder; only typed errors",
  observed: (results) => {
    const fate = (metric) => [...new Set(results.map((r) => r.metrics?.[metric]).filter(Boolean))].join(" / ");
    return (
      `failover ${range(results, "failoverMs")} after SIGKILL (replica stopped ${range(results, "replicaStoppedMs")}); ` +
      `unreplicated lock: ${fate("victimFate")}; replicated lock: ${fate("replicatedFate")}; ` +
      `${sum(results, "sectionsAfter")} sections on the new master; tokens rose ${sum(results, "tokensRose")}/` +
      `${results.length}; stale writes ${sum(results, "staleRejected")} rejected / ${sum(results, "staleAccepted")} ` +
      `accepted; overlaps ${sum(results, "overlaps")} (all with the lost holder); typed errors ` +
      `${sum(results, "typedErrors")}, other ${sum(results, "otherErrors")}`
    );
  },

  async run(ctx, p, _seed, checks) {
    const group = await startSentinelGroup({ downAfterMs: p.downAfterMs, failoverTimeoutMs: p.failoverTimeoutMs });
    ctx.onTeardown(() => group.stop());
    ctx.adoptServers([...group.servers, ...group.sentinels]);
    const { master, replica } = group;
    ctx.lockServers = [master, replica];
    ctx.lockAdmins = [master.client(), replica.client()];
    const [masterAdmin, replicaAdmin] = ctx.lockAdmins;
    ctx.log(`master ${master.port}, replica ${replica.port}, Sentinels ${group.sentinelPorts.join(", ")}`);

    const base = {
      hold: p.hold,
      expiry: p.expiry,
      backoffMax: p.backoffMax,
      fencing: true,
      sentinel: { ports: group.sentinelPorts, name: group.masterName },
    };
    const keysOf = (index) => (index === 1 ? ["k1"] : ["k0"]);
    await ctx.pool.start(
      Array.from({ length: p.processes }, (_, index) => ctx.workerConfig(index, { ...base, keys: keysOf(index) })),
    );
    const [victim, keeper, ...contenders] = ctx.pool.workers;
    ctx.pool.go();
    await ctx.sectionsAfter(0, p.warmup, 20_000, "warm-up");

    // Quiet k0: the victim and the contenders finish what they are doing and wait.
    const onK0 = [victim, ...contenders];
    const pausedAt = now();
    for (const worker of onK0) worker.send({ type: "pause" });
    await Promise.all(
      onK0.map((w) => w.waitFor((e) => e.type === "paused" && e.receivedAt > pausedAt, 20_000, "paused")),
    );
    // w1 holds k1 across the failover; its key must have reached the replica.
    keeper.send({ type: "arm", hold: { kind: "sleep", ms: p.holdMs } });
    const keeperIn = await keeper.waitForNext((e) => e.type === "entered", 20_000, "k1 holder inside");
    const keeperToken = await masterAdmin.get(`${ctx.prefix}k1`);
    const replicated = await waitUntil(async () => (await replicaAdmin.get(`${ctx.prefix}k1`)) === keeperToken, 5000);

    // Cut replication, grant k0 on the master only, kill the master, thaw the replica.
    const stoppedAt = now();
    replica.pause();
    let killAt;
    let victimIn;
    let victimToken;
    let slavesAfterCut;
    try {
      await masterAdmin.client("KILL", "TYPE", "replica");
      slavesAfterCut = Number(/connected_slaves:(\d+)/.exec(await masterAdmin.info("replication"))?.[1]);
      victim.send({ type: "arm", hold: { kind: "sleep", ms: p.holdMs } });
      victim.send({ type: "resume" });
      victimIn = await victim.waitForNext((e) => e.type === "entered", 5000, "victim inside");
      victimToken = await masterAdmin.get(`${ctx.prefix}k0`);
      for (const worker of contenders) worker.send({ type: "resume" });
      await master.kill();
      killAt = now();
    } finally {
      replica.resume();
    }
    const replicaStoppedMs = now() - stoppedAt;
    ctx.log(`master killed; replica was stopped ${Math.round(replicaStoppedMs)} ms`);
    const failover = await group.waitForFailover({ timeoutMs: p.failoverWaitMs });
    const failoverAt = now();
    const failoverMs = failoverAt - killAt;
    ctx.log(`failover to ${failover.port} after ${Math.round(failoverMs)} ms`);
    const k0After = await replicaAdmin.get(`${ctx.prefix}k0`);
    const k1After = await replicaAdmin.get(`${ctx.prefix}k1`);

    const victimEnd = await victim.waitFor((e) => e.type === "special", p.holdMs + 20_000, "victim finished");
    const keeperEnd = await keeper.waitFor((e) => e.type === "special", p.holdMs + 20_000, "k1 holder finished");
    await ctx.sectionsAfter(failoverAt, p.sectionsAfterFailover, 20_000, "sections on the new master");
    const history = await ctx.finish(checks, ["k0", "k1"]);

    checks.equal("the Sentinels promoted the replica", failover.port, replica.port);
    checks.add("k1 (held across) had reached the replica before the cut", replicated, "yes", replicated ? "yes" : "no");
    checks.add(
      "replication cut before the victim's grant",
      slavesAfterCut === 0,
      "master: connected_slaves:0",
      `connected_slaves:${slavesAfterCut}`,
    );
    checks.add(
      "the victim's key never reached the new master",
      victimToken !== null && k0After !== victimToken,
      "absent (or another holder's token)",
      k0After === null ? "absent" : k0After === victimToken ? "the victim's token" : "another token",
    );
    checks.add(
      "the unreplicated lock is reported lost during its section",
      victimEnd.lostAt !== undefined && victimEnd.lostAt < victimEnd.releaseStartedAt,
      "lost before its release",
      victimEnd.lostAt === undefined
        ? "never"
        : `${victimEnd.lostReason} ${Math.round(victimEnd.lostAt - killAt)} ms after the kill`,
    );
    checks.add(
      'its release is not "released"',
      victimEnd.releaseOutcome !== "released",
      "not released",
      victimEnd.releaseOutcome,
    );
    const silent = [victimEnd, keeperEnd].filter(
      (end) => end.lostAt === undefined && end.releaseOutcome !== "released",
    );
    checks.add(
      "no lock silently kept: every lock held across is reported lost, or kept its key to the end",
      silent.length === 0,
      'lost, or released with "released"',
      silent.length === 0 ? "none silent" : silent.map((end) => `${end.key}: ${end.releaseOutcome}`).join(", "),
    );
    const after = ctx.pool.events.filter((e) => e.type === "released" && e.t > failoverAt && e.outcome === "released");
    checks.atLeast("sections complete on the new master", after.length, p.sectionsAfterFailover);
    const acquired = ctx.pool.events.filter((e) => e.type === "acquired" && e.token !== undefined);
    const maxBefore = maxToken(acquired.filter((e) => e.t < killAt));
    const minAfter = minToken(acquired.filter((e) => e.startedAt > failoverAt));
    const tokensRose = maxBefore !== undefined && minAfter !== undefined && compareTokens(minAfter, maxBefore) > 0;
    checks.add(
      "fencing tokens rise across the failover",
      tokensRose,
      "first after > last before",
      `${maxBefore} → ${minAfter}`,
    );
    checks.add(
      "every overlap involves the holder whose lock was lost",
      overlapsOnlyWith(history, victimIn.holderId),
      `all involve ${victimIn.holderId}`,
      `${history.overlaps.length} overlaps`,
    );
    const acquireErrors = checkTypedAcquireErrors(checks, ctx.pool.events);
    const fateOf = (end, keyAfter, token) =>
      end.lostAt === undefined
        ? `kept (key ${keyAfter === token ? "on the new master" : "not found there"}), release ${end.releaseOutcome}`
        : `lost (${end.lostReason}) ${Math.round(end.lostAt - killAt)} ms after the kill, release ${end.releaseOutcome}`;
    return {
      failoverMs,
      replicaStoppedMs,
      victimFate: fateOf(victimEnd, k0After, victimToken),
      replicatedFate: fateOf(keeperEnd, k1After, keeperToken),
      victimLostAfterKillMs: victimEnd.lostAt === undefined ? undefined : victimEnd.lostAt - killAt,
      keeperLostAfterKillMs: keeperEnd.lostAt === undefined ? undefined : keeperEnd.lostAt - killAt,
      sectionsAfter: after.length,
      tokensRose: tokensRose ? 1 : 0,
      staleRejected: history.fenced.staleRejected,
      staleAccepted: history.fenced.staleAccepted,
      overlaps: history.overlaps.length,
      lostUpdates: history.lostUpdates,
      typedErrors: acquireErrors.typed,
      otherErrors: acquireErrors.other,
      keeperEntered: keeperIn.t,
    };
  },
};

/** Polls `check` every 10 ms until it resolves true (→ true) or `ms` pass (→ false). */
async function waitUntil(check, ms) {
  const deadline = now() + ms;
  while (now() < deadline) {
    if (await check().catch(() => false)) return true;
    await sleep(10);
  }
  return false;
}

function maxToken(events) {
  return events.map((e) => e.token).reduce((a, b) => (a === undefined || compareTokens(b, a) > 0 ? b : a), undefined);
}

function minToken(events) {
  return events.map((e) => e.token).reduce((a, b) => (a === undefined || compareTokens(b, a) < 0 ? b : a), undefined);
}
