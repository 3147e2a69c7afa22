/**
 * Scenario 6 — the lock server (not the referee) is SIGKILLed while a holder is inside its section
 * and restarted at once, empty (no persistence). The held lock is gone from Redis while its holder
 * still works: overlap is possible here (a contender can take the fresh key), so C1 only reports
 * it. What must hold:
 *
 * - the holder's lease reports the loss within expiry / 2 (one sweep) + the outage + a margin;
 * - no extension re-creates a key: no token SET before the restart is SET again after it (Redis
 *   MONITOR, attached before the workers start and again right after the restart; plus sampling);
 * - fencing tokens keep rising across the restart, so C3 still refuses every stale write;
 * - acquisitions during the outage fail with the typed StoreUnavailableError, nothing is an
 *   unhandled rejection, and clients reconnect: sections complete after the restart.
 */
import { checkNoStaleAccepted, checkTypedAcquireErrors, overlapsOnlyWith } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { LockSetRecorder, RESERVATION } from "../lib/lock-monitor.mjs";
import { compareTokens } from "../lib/referee.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "redis-restart",
  number: "6",
  title: "lock server killed, restarted empty",
  expected: (p) =>
    `lost reported ≤ expiry/2 + outage + ${p.marginMs} ms after the kill; no pre-restart token ever SET again; ` +
    "fencing tokens rise across it, 0 stale writes accepted; only typed errors, 0 unhandled rejections; work resumes",
  observed: (results) =>
    `outage ${range(results, "outageMs")}; lost ${range(results, "lostAfterKillMs")} after the kill ` +
    `(${range(results, "lostAfterRestartMs")} after the restart); re-created keys ${sum(results, "recreated")} ` +
    `(${sum(results, "postRestartObservations")} SETs/samples checked); typed errors ${sum(results, "typedErrors")}, ` +
    `other ${sum(results, "otherErrors")}; ${sum(results, "sectionsAfter")} sections after restart; overlaps ` +
    `${sum(results, "overlaps")} (expected, all with the holder whose key vanished), stale writes ${sum(results, "staleRejected")} rejected / ` +
    `${sum(results, "staleAccepted")} accepted`,

  async run(ctx, p, _seed, checks) {
    const keys = ["k0"];
    const server = ctx.lockServers[0];
    const recorder = new LockSetRecorder(server, ctx.prefix);
    ctx.onTeardown(() => recorder.close());
    await recorder.attach();
    const [victim] = await ctx.startWarmedUp(p.processes, keys, p);
    victim.send({ type: "arm", hold: { kind: "sleep", ms: p.victimHoldMs } });
    const entered = await victim.waitForNext((e) => e.type === "entered", 20_000, "holder inside");

    const killAt = now();
    await server.kill();
    await sleep(p.downMs);
    await server.restart();
    const restartedAt = now();
    await recorder.attach();
    const preRestart = recorder.tokens(0);

    // Sample the key for a while: a re-created key would live for up to an expiry.
    const samples = [];
    const sampleUntil = now() + 2 * p.expiry;
    while (now() < sampleUntil) {
      const value = await ctx.lockValue("k0").catch(() => undefined);
      if (value) samples.push(value);
      await sleep(p.sampleMs);
    }
    const special = await victim.waitFor((e) => e.type === "special", 10 * p.expiry, "holder finished");
    await ctx.sectionsAfter(restartedAt, p.sectionsAfterRestart, 20 * p.expiry, "sections after the restart");
    const history = await ctx.finish(checks, keys);

    const postSets = recorder.sets.filter((s) => s.generation === 1);
    const sampledTokens = samples.filter((value) => !value.startsWith(RESERVATION));
    const recreated = [...postSets.map((s) => s.token), ...sampledTokens].filter((token) => preRestart.has(token));
    checks.add(
      "no lock token from before the restart is SET again",
      recreated.length === 0,
      "0",
      `${recreated.length} of ${postSets.length} SETs + ${sampledTokens.length} samples`,
    );
    checks.atLeast("post-restart SETs observed (the check is not vacuous)", postSets.length, 1);
    checks.atLeast("pre-restart SETs observed", preRestart.size, 1);

    const outageMs = restartedAt - killAt;
    const lostAfterKill = special.lostAt === undefined ? Number.NaN : special.lostAt - killAt;
    checks.add(
      "holder's lease lost signal fired",
      special.lostAt !== undefined,
      "fired",
      special.lostReason ?? "never",
    );
    const bound = Math.round(p.expiry / 2 + outageMs + p.marginMs);
    checks.atMost("loss reported within expiry/2 + outage + margin", Math.round(lostAfterKill), bound, " ms");

    const acquired = ctx.pool.events.filter((e) => e.type === "acquired" && e.token !== undefined);
    const maxBefore = maxToken(acquired.filter((e) => e.t < killAt));
    const minAfter = minToken(acquired.filter((e) => e.startedAt > restartedAt));
    checks.add(
      "fencing tokens rise across the restart",
      maxBefore !== undefined && minAfter !== undefined && compareTokens(minAfter, maxBefore) > 0,
      "first token after > last token before",
      `${maxBefore} → ${minAfter}`,
    );
    checks.add(
      "every overlap involves the holder whose key vanished",
      overlapsOnlyWith(history, entered.holderId),
      `all involve ${entered.holderId}`,
      `${history.overlaps.length} overlaps`,
    );
    checkNoStaleAccepted(checks, history);
    const acquireErrors = checkTypedAcquireErrors(checks, ctx.pool.events);
    const sectionsAfter = ctx.pool.events.filter((e) => e.type === "released" && e.t > restartedAt).length;
    checks.atLeast("sections complete after the restart", sectionsAfter, p.sectionsAfterRestart);
    return {
      outageMs,
      lostAfterKillMs: lostAfterKill,
      lostAfterRestartMs: special.lostAt - restartedAt,
      lostReason: special.lostReason,
      recreated: recreated.length,
      postRestartObservations: postSets.length + sampledTokens.length,
      typedErrors: acquireErrors.typed,
      otherErrors: acquireErrors.other,
      sectionsAfter,
      overlaps: history.overlaps.length,
      staleRejected: history.fenced.staleRejected,
      staleAccepted: history.fenced.staleAccepted,
      lostUpdates: history.lostUpdates,
      entered: entered.t,
    };
  },
};

function maxToken(events) {
  return events.map((e) => e.token).reduce((a, b) => (a === undefined || compareTokens(b, a) > 0 ? b : a), undefined);
}

function minToken(events) {
  return events.map((e) => e.token).reduce((a, b) => (a === undefined || compareTokens(b, a) < 0 ? b : a), undefined);
}
