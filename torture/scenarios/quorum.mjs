/**
 * Scenario 8 — RedisLocker over a 5-node Redlock quorum (each worker has one client per node; no
 * fencing: it needs a single node). Three phases, with workers looping throughout:
 *
 * A. two nodes SIGKILLed: a majority (3) is left, locking goes on, exclusion holds;
 * B. a third node killed: no majority. Every acquisition fails with the typed
 *    StoreUnavailableError (code ERR_GLOBALLOCK_STORE_UNAVAILABLE), none reports success, and once
 *    the workers are paused no partial key is left on the two live nodes;
 * C. two of the dead nodes restarted empty (4 live): locking resumes, still exclusive.
 *
 * C1 and C2 must report nothing over the whole run.
 */
import { checkNoLostUpdates, checkNoOverlap } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { RunContext } from "../lib/run-context.mjs";
import { range, sum } from "../report.mjs";

const STORE_UNAVAILABLE = "ERR_GLOBALLOCK_STORE_UNAVAILABLE";

export default {
  id: "quorum",
  number: "8",
  title: "5-node quorum: 2 killed, 3 killed, 2 restarted empty",
  lockNodes: () => 5,
  expected: () =>
    "2 down: sections go on; 3 down: only typed StoreUnavailableError, 0 false successes, 0 partial keys; " +
    "2 restarted: sections go on; 0 overlaps, 0 lost updates throughout",
  observed: (results) =>
    `sections with 2 down ${sum(results, "sectionsTwoDown")}, after restart ${sum(results, "sectionsRestarted")}; ` +
    `3 down: ${sum(results, "typedErrors")} typed errors, ${sum(results, "otherErrors")} other, ` +
    `${sum(results, "falseSuccesses")} false successes, partial keys ${sum(results, "partialKeys")} ` +
    `(checked ${range(results, "checkAfterLastFailureMs")} after the last failure); overlaps ${sum(results, "overlaps")}, ` +
    `lost updates ${sum(results, "lostUpdates")}`,

  async run(ctx, p, _seed, checks) {
    const keys = Array.from({ length: p.keys }, (_, i) => `k${i}`);
    const workers = await ctx.startWorkers(p.processes, {
      keys,
      hold: p.hold,
      expiry: p.expiry,
      backoffMax: p.backoffMax,
      fencing: false,
    });
    const [n0, n1, n2] = ctx.lockServers;
    ctx.pool.go();
    await ctx.sectionsAfter(0, p.warmup, 20_000, "warm-up");

    // A: a minority down.
    ctx.log("killing nodes 0 and 1");
    await Promise.all([n0.kill(), n1.kill()]);
    const twoDownAt = now();
    await ctx.sectionsAfter(twoDownAt, p.sectionsPerPhase, 20_000, "sections with two nodes down");
    const sectionsTwoDown = countSections(ctx, twoDownAt);
    const twoDownMs = now() - twoDownAt;

    // B: no majority.
    ctx.log("killing node 2");
    await n2.kill();
    const threeDownAt = now();
    await sleep(p.noQuorumMs);
    for (const worker of workers) worker.send({ type: "pause" });
    await Promise.all(
      workers.map((w) => w.waitForNext((e) => e.type === "paused", 10 * p.expiry, "paused without a quorum")),
    );
    const checkedAt = now();
    ctx.log("workers paused; checking for partial keys");
    const partial = await ctx.lockKeys();
    const failures = ctx.pool.events.filter((e) => e.type === "acquireError" && e.startedAt > threeDownAt);
    const falseSuccesses = ctx.pool.events.filter((e) => e.type === "acquired" && e.startedAt > threeDownAt);
    const lastFailureAt = Math.max(...failures.map((e) => e.t));

    // C: two nodes back, empty.
    ctx.log("restarting nodes 0 and 1");
    await Promise.all([n0.restart(), n1.restart()]);
    ctx.log("nodes 0 and 1 restarted");
    const restartedAt = now();
    for (const worker of workers) worker.send({ type: "resume" });
    const stopWatching = watchKeys(ctx);
    await ctx
      .sectionsAfter(restartedAt, p.sectionsPerPhase, 20_000, "sections after the restart")
      .finally(stopWatching);
    const sectionsRestarted = countSections(ctx, restartedAt);
    const restartedMs = now() - restartedAt;
    const history = await ctx.finish(checks, keys);

    checks.atLeast("two nodes down: sections go on", sectionsTwoDown, p.sectionsPerPhase);
    checks.atLeast("three nodes down: acquisitions fail", failures.length, p.processes);
    const other = failures.filter((e) => e.code !== STORE_UNAVAILABLE);
    checks.add(
      "three nodes down: every failure is a typed StoreUnavailableError",
      other.length === 0,
      `all ${STORE_UNAVAILABLE}`,
      other.length === 0 ? `${failures.length} typed` : `${other[0].code}: ${other[0].message}`,
    );
    checks.equal("three nodes down: no false success", falseSuccesses.length, 0);
    checks.add(
      "three nodes down: no partial key on the live nodes",
      partial.length === 0,
      "none",
      partial.length === 0 ? "none" : RunContext.describeKeys(partial),
    );
    checks.atMost(
      "partial keys checked before a leaked one could expire",
      Math.round(checkedAt - lastFailureAt),
      p.expiry,
      " ms",
    );
    checks.atLeast("two nodes restarted: sections go on", sectionsRestarted, p.sectionsPerPhase);
    checkNoOverlap(checks, history);
    checkNoLostUpdates(checks, history);
    return {
      twoDownMs,
      restartedMs,
      sectionsTwoDown,
      sectionsRestarted,
      typedErrors: failures.length - other.length,
      otherErrors: other.length,
      falseSuccesses: falseSuccesses.length,
      partialKeys: partial.length,
      checkAfterLastFailureMs: checkedAt - lastFailureAt,
      overlaps: history.overlaps.length,
      lostUpdates: history.lostUpdates,
    };
  },
};

/** Sections completed (released) after `since`. */
function countSections(ctx, since) {
  return ctx.pool.events.filter((e) => e.type === "released" && e.t > since).length;
}

/** With TORTURE_VERBOSE, logs the lock keys of the live nodes every 200 ms; returns the stopper. */
function watchKeys(ctx) {
  if (!process.env.TORTURE_VERBOSE) return () => undefined;
  let stopped = false;
  void (async () => {
    while (!stopped) {
      const keys = await ctx.lockKeys().catch((error) => [String(error)]);
      ctx.log(
        `keys: ${JSON.stringify(keys.map((k) => (typeof k === "string" ? k : `${k.node}:${k.value?.slice(0, 6)}:${k.pttl}`)))}`,
      );
      await sleep(200);
    }
  })();
  return () => {
    stopped = true;
  };
}
