/**
 * Scenario 9 — a slow link: every lock connection of the workers (commands and the release
 * subscriber) goes through a TCP proxy on 127.0.0.1 that adds a one-way latency (300 ms each way:
 * a 600 ms round trip), with expiry 2000 and operationTimeout 900. Workers (two tasks each in the
 * full profile) hold every lease for 2–3 × expiry, so each lease must be extended several times
 * over the slow link — a fresh one soon: it is a round trip old when it arrives — and a process
 * often holds two leases at once (batched extensions). Fencing is on, as everywhere on one node
 * (before dc53426 the token took a second round trip, and a fenced lease on a 700 ms round trip
 * was lost at its first extension: repro/fenced-lease-slow-link.mjs).
 *
 * The referee and the parent's sampler talk to Redis directly, not through the proxy. What must
 * hold: no lease lost, every section completes, every release "released", and — read directly
 * from Redis, sampled — the lock key holds a token whenever the referee has its holder inside.
 * The lease keepers report how close they came (`leaseStats.minHeadroomMs`: the least validity a
 * lease had left when its extension was confirmed) and how many extensions they made.
 */

import { TcpProxy } from "../../support/tcp-proxy.mjs";
import { checkNoLostUpdates, checkNoOverlap } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { RESERVATION } from "../lib/lock-monitor.mjs";
import { leaseStatsOf } from "../lib/run-context.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "slow-link",
  number: "9",
  title: "slow link: 600 ms round trip through a TCP proxy",
  expected: (p) =>
    `${2 * p.latencyMs} ms RTT, expiry ${p.expiry}, operationTimeout ${p.operationTimeout}; sections of ` +
    `${p.hold.min / p.expiry}–${p.hold.max / p.expiry} × expiry: 0 leases lost, every section completes and releases, ` +
    "key held (read directly) whenever its holder is inside, 0 overlaps, 0 lost updates, 0 stale writes",
  observed: (results) =>
    `${sum(results, "sections")} sections (${range(results, "minSectionMs")} shortest); ` +
    `lost ${sum(results, "lostLeases")}; ${sum(results, "extensions")} extensions in ${sum(results, "batches")} ` +
    `commands (${sum(results, "retries")} retries); min headroom ${range(results, "minHeadroomMs")}; ` +
    `min key TTL seen while held ${range(results, "minHeldPttl")} (${sum(results, "heldSamples")} direct samples, ` +
    `${sum(results, "keyMissingWhileInside")} without the key); fastest acquisition ${range(results, "minAcquireMs")}, ` +
    `longest wait ${range(results, "maxAcquireMs")}; errors ${sum(results, "errors")}; ` +
    `overlaps ${sum(results, "overlaps")}, ` +
    `lost updates ${sum(results, "lostUpdates")}, stale writes ${sum(results, "staleWrites")}`,

  async run(ctx, p, _seed, checks) {
    const keys = Array.from({ length: p.keys }, (_, i) => `k${i}`);
    const proxy = await TcpProxy.start(ctx.lockServers[0].port, { latencyMs: p.latencyMs });
    ctx.onTeardown(() => proxy.close());
    await ctx.startWorkers(p.processes, {
      keys,
      tasks: p.tasks,
      sections: p.sections,
      hold: p.hold,
      expiry: p.expiry,
      operationTimeout: p.operationTimeout,
      backoffMax: p.backoffMax,
      lockPorts: [proxy.port],
    });
    const connectionsThroughProxy = proxy.connectionCount;
    ctx.pool.go();

    // Sample directly (not through the proxy): referee holders, lock key, referee holders again.
    // A holder inside at both referee reads (same attempt) was inside when the key was read.
    let sampling = true;
    const samples = [];
    const sampler = (async () => {
      while (sampling) {
        for (const key of keys) {
          const before = await ctx.referee.holders(key);
          const [[, value], [, pttl]] = await ctx.lockAdmins[0]
            .multi()
            .get(`${ctx.prefix}${key}`)
            .pttl(`${ctx.prefix}${key}`)
            .exec();
          const after = await ctx.referee.holders(key);
          const inside = Object.entries(before).filter(
            ([id, entry]) => after[id] !== undefined && after[id].attempt === entry.attempt,
          );
          if (inside.length > 0) samples.push({ key, t: now(), value, pttl, holders: inside.map(([id]) => id) });
        }
        await sleep(p.sampleMs);
      }
    })();
    try {
      await ctx.pool.finished(p.timeoutMs - 10_000);
    } finally {
      sampling = false;
      await sampler.catch(() => undefined);
    }
    const history = await ctx.finish(checks, keys);
    const stats = leaseStatsOf(ctx.pool.workers);
    const events = ctx.pool.events;

    const expectedSections = p.processes * p.tasks * p.sections;
    checks.equal("every long section completed", history.completed, expectedSections);
    const lost = events.filter((e) => e.type === "lost");
    checks.add(
      "no lease lost",
      lost.length === 0,
      "0",
      lost.length === 0 ? "0" : `${lost.length}: ${lost[0].reason} (${lost[0].worker})`,
    );
    const notReleased = events.filter((e) => e.type === "released" && e.outcome !== "released");
    checks.add(
      'every release "released"',
      notReleased.length === 0,
      "all released",
      notReleased.length === 0 ? "all released" : `${notReleased.length} not: ${notReleased[0].outcome}`,
    );
    const errors = events.filter((e) => e.type === "acquireError");
    checks.add(
      "no acquire error",
      errors.length === 0,
      "0",
      errors.length === 0 ? "0" : `${errors.length}: ${errors[0].code} ${errors[0].message}`,
    );
    const missing = samples.filter((s) => s.value === null || s.value.startsWith(RESERVATION));
    checks.add(
      "lock key held (read directly) whenever its holder is inside",
      missing.length === 0,
      "always",
      missing.length === 0
        ? `${samples.length} samples`
        : `${missing.length} of ${samples.length} without it (first: ${JSON.stringify(missing[0])})`,
    );
    checks.atLeast("direct samples taken while a holder was inside", samples.length, expectedSections);
    checks.equal("every worker reported its lease statistics", stats.reported, p.processes);
    // Each section outlasts its lease at least floor(hold.min / expiry) times over.
    checks.atLeast(
      "extensions made (each long section needs several)",
      stats.extensions,
      expectedSections * Math.floor(p.hold.min / p.expiry),
    );
    checks.add(
      "every confirmed extension had validity to spare",
      stats.minHeadroomMs > 0,
      "min headroom > 0 ms",
      `${Math.round(stats.minHeadroomMs)} ms`,
    );
    checks.atLeast("lock connections went through the proxy", connectionsThroughProxy, p.processes);
    checkNoOverlap(checks, history);
    checkNoLostUpdates(checks, history);
    const staleWrites = history.fenced.staleAccepted + history.fenced.staleRejected;
    checks.equal("C3 no stale write at all", staleWrites, 0);

    const acquired = events.filter((e) => e.type === "acquired");
    const released = events.filter((e) => e.type === "released");
    const sectionMs = acquired
      .map((a) => {
        const r = released.find((e) => e.worker === a.worker && e.task === a.task && e.attempt === a.attempt);
        return r === undefined ? undefined : r.t - a.t;
      })
      .filter((v) => v !== undefined);
    // The fastest acquisition is an uncontended one (one round trip, or two where the fencing
    // token is fetched separately).
    const acquireMs = acquired.map((a) => a.t - a.startedAt);
    return {
      sections: history.completed,
      minSectionMs: Math.min(...sectionMs),
      maxSectionMs: Math.max(...sectionMs),
      lostLeases: lost.length,
      extensions: stats.extensions,
      batches: stats.batches,
      retries: stats.retries,
      minHeadroomMs: stats.minHeadroomMs,
      maxLatenessMs: stats.maxLatenessMs,
      heldSamples: samples.length,
      keyMissingWhileInside: missing.length,
      minHeldPttl: Math.min(...samples.filter((s) => s.pttl > 0).map((s) => s.pttl)),
      minAcquireMs: Math.min(...acquireMs),
      maxAcquireMs: Math.max(...acquireMs),
      connectionsThroughProxy,
      errors: errors.length,
      overlaps: history.overlaps.length,
      lostUpdates: history.lostUpdates,
      staleWrites,
    };
  },
};
