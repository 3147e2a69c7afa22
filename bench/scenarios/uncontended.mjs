/**
 * Scenarios 1 and 2: uncontended acquire + release against Redis.
 *
 * - sequential: one loop, lock then release, on one key;
 * - 8 keys: 8 concurrent loops, each on its own key, sharing the contender's one connection.
 *
 * Contenders: the raw floor (SET NX PX + Lua compare-and-delete), globallock, redlock used directly
 * with retryCount 0, and redis-semaphore's Mutex. Rounds interleave the contenders (A, B, C, D, A,
 * B, …); the report gives medians across rounds and, per round, the ratio to the raw floor, plus
 * the CPU time per acquire + release of Node (process.cpuUsage over the loop) and of redis-server
 * (INFO cpu, used_cpu_user + used_cpu_sys, over the loop), and the Redis commands per acquire +
 * release of the sequential loop: every command Redis executed (INFO commandstats, including
 * those run inside Lua scripts), split into top-level ones (sent by the client, counted on the
 * client side) and inner ones (executed − sent).
 */
import { measureCosts, splitTopLevel, sumCounts, totalOf } from "../lib/command-stats.mjs";
import { CONFIG } from "../lib/config.mjs";
import { globallock, raw, redisSemaphore, redlockNoRetry } from "../lib/redis-contenders.mjs";
import { median, percentile } from "../lib/stats.mjs";
import { now } from "../lib/timing.mjs";

const CONTENDERS = [raw, globallock, redlockNoRetry, redisSemaphore];

/**
 * Lock + release in one loop for `durationMs` or `maxOps`, whichever ends first.
 * @param {import("../lib/redis-contenders.mjs").Session} session
 * @returns {Promise<{ ops: number, elapsedMs: number, pairs: Float64Array }>}
 */
export async function sequential(session, key, durationMs, maxOps) {
  const pairs = new Float64Array(maxOps);
  const start = now();
  const end = start + durationMs;
  let ops = 0;
  let t = start;
  while (t < end && ops < maxOps) {
    const release = await session.lock(key);
    if (release === undefined) throw new Error(`uncontended lock of ${key} failed`);
    await release();
    const done = now();
    pairs[ops++] = done - t;
    t = done;
  }
  return { ops, elapsedMs: now() - start, pairs: pairs.subarray(0, ops) };
}

/**
 * `concurrency` loops of lock + release, each on its own key, sharing `session`.
 * @param {import("../lib/redis-contenders.mjs").Session} session
 * @returns {Promise<{ ops: number, elapsedMs: number }>}
 */
export async function concurrent(session, keyPrefix, concurrency, durationMs, maxOps) {
  const start = now();
  const end = start + durationMs;
  let ops = 0;
  const loop = async (key) => {
    while (now() < end && ops < maxOps) {
      const release = await session.lock(key);
      if (release === undefined) throw new Error(`uncontended lock of ${key} failed`);
      await release();
      ops++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => loop(`${keyPrefix}:${i}`)));
  return { ops, elapsedMs: now() - start };
}

/**
 * Interleaved rounds of the sequential and 8-key loops over `contenders` (one of them the raw floor,
 * id "raw"): per contender, medians over rounds, ratios to the floor of the same round, CPU and
 * Redis commands per acquire + release. Also used by the semaphore scenario.
 * @param {import("../lib/redis-contenders.mjs").Contender[]} contenders
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 * @param {{ rounds: number, warmupMs: number, durationMs: number, maxOps: number, concurrency: number }} settings
 * @param {string} name the scenario's name in progress lines and keys
 */
export async function measureUncontended(contenders, { port, monitor, log }, settings, name = "uncontended") {
  const { rounds, warmupMs, durationMs, maxOps, concurrency } = settings;
  const sessions = new Map();
  try {
    for (const contender of contenders) {
      const session = await contender.open(port);
      sessions.set(contender.id, session);
      // Warm-up: connection, script cache, JIT.
      await sequential(session, `bench:warm:${contender.id}`, warmupMs, maxOps);
      await concurrent(session, `bench:warm:${contender.id}`, concurrency, warmupMs, maxOps);
    }
    /** @type {Record<string, object[]>} */
    const perRound = Object.fromEntries(contenders.map((c) => [c.id, []]));
    for (let round = 0; round < rounds; round++) {
      for (const contender of contenders) {
        const session = sessions.get(contender.id);
        const key = `bench:${name}:${contender.id}`;
        const seqCosts = await measureCosts(monitor, () => sequential(session, key, durationMs, maxOps));
        const concCosts = await measureCosts(monitor, () => concurrent(session, key, concurrency, durationMs, maxOps));
        const seq = seqCosts.result;
        const conc = concCosts.result;
        perRound[contender.id].push({
          seqOpsPerSec: (seq.ops * 1000) / seq.elapsedMs,
          seqPairP50Ms: median(seq.pairs),
          seqPairP99Ms: percentile(seq.pairs, 99),
          concOpsPerSec: (conc.ops * 1000) / conc.elapsedMs,
          seqCpuUsPerOp: (seqCosts.nodeCpuMs * 1000) / seq.ops,
          concCpuUsPerOp: (concCosts.nodeCpuMs * 1000) / conc.ops,
          seqRedisCpuUsPerOp: (seqCosts.redisCpuMs * 1000) / seq.ops,
          concRedisCpuUsPerOp: (concCosts.redisCpuMs * 1000) / conc.ops,
          seqOps: seq.ops,
          concOps: conc.ops,
          seqServer: seqCosts.server,
          seqClient: seqCosts.client,
          concServer: concCosts.server,
          concClient: concCosts.client,
        });
      }
      log(`${name}: round ${round + 1}/${rounds} done`);
    }
    const floor = perRound.raw;
    return contenders.map((contender) => {
      const rows = perRound[contender.id];
      // Commands per acquire + release, pooled over rounds (sequential loop; 8 keys in the JSON).
      const perOp = (field, opsField) => {
        const ops = rows.reduce((sum, r) => sum + r[opsField], 0);
        return Object.fromEntries(
          Object.entries(sumCounts(rows.map((r) => r[field])))
            .sort((x, y) => y[1] - x[1])
            .map(([command, count]) => [command, count / ops]),
        );
      };
      const seqServer = perOp("seqServer", "seqOps");
      const { topLevel, inner } = splitTopLevel(seqServer, perOp("seqClient", "seqOps"));
      const concServer = perOp("concServer", "concOps");
      return {
        id: contender.id,
        label: contender.label,
        rounds: rows,
        seqOpsPerSec: median(rows.map((r) => r.seqOpsPerSec)),
        seqPairP50Ms: median(rows.map((r) => r.seqPairP50Ms)),
        seqPairP99Ms: median(rows.map((r) => r.seqPairP99Ms)),
        concOpsPerSec: median(rows.map((r) => r.concOpsPerSec)),
        seqCpuUsPerOp: median(rows.map((r) => r.seqCpuUsPerOp)),
        concCpuUsPerOp: median(rows.map((r) => r.concCpuUsPerOp)),
        seqRedisCpuUsPerOp: median(rows.map((r) => r.seqRedisCpuUsPerOp)),
        concRedisCpuUsPerOp: median(rows.map((r) => r.concRedisCpuUsPerOp)),
        commandsPerOp: totalOf(seqServer),
        topLevelPerOp: totalOf(topLevel),
        innerPerOp: totalOf(inner),
        topLevelBreakdown: topLevel,
        innerBreakdown: inner,
        concCommandsPerOp: totalOf(concServer),
        concServerBreakdown: concServer,
        // Ratio to the floor measured in the same round, then the median over rounds.
        seqRatio: median(rows.map((r, i) => r.seqOpsPerSec / floor[i].seqOpsPerSec)),
        concRatio: median(rows.map((r, i) => r.concOpsPerSec / floor[i].concOpsPerSec)),
      };
    });
  } finally {
    for (const session of sessions.values()) await session.close();
  }
}

/**
 * Runs scenarios 1–2.
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 */
export async function runUncontended(context) {
  const { rounds, durationMs, maxOps, concurrency } = CONFIG.uncontended;
  const results = await measureUncontended(CONTENDERS, context, CONFIG.uncontended);
  const tPairMs = results.find((r) => r.id === "globallock").seqPairP50Ms;
  return { config: { rounds, durationMs, maxOps, concurrency }, results, tPairMs };
}
