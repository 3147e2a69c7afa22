/**
 * Scenario 9: PostgresLocker beside RedisLocker, in the same run.
 *
 * - Uncontended: sequential lock + release on one key; p50/p99 of one acquire + release and ops/s,
 *   for RedisLocker (default options, its own connection) and PostgresLocker (default options, a
 *   `pg.Pool` of its own).
 * - Hand-off: A holds, B (another locker: its own connection) waits in lock(); A releases at t0
 *   (just before calling release), B's lock resolves at t1; latency t1 − t0. B in this process.
 * - Contended (bench/lib/store-contention.mjs): 8 workers on one key, each with its own
 *   PostgresLocker (a pool of its own), beside the raw floor: a blocking `pg_advisory_lock` on a
 *   dedicated connection per worker (PostgreSQL's own wait queue) and `pg_advisory_unlock`.
 * - Connection models (the "measure both and pick"): the raw statements of a lock +
 *   release on PostgreSQL, (a) a dedicated connection per lock (pool.connect, pg_try_advisory_lock,
 *   pg_advisory_unlock, client.release) and (b) one connection multiplexing every key (the two
 *   statements only), sequentially and with 8 keys in flight at once; plus the pool connections
 *   each model needs to hold 50 locks.
 *
 * It starts its own PostgreSQL (support/postgres-server.mjs: initdb in a temp dir, a free loopback
 * port) and stops it at the end. Rounds interleave the contenders.
 */
import { PostgresLocker, RedisLocker } from "globallock";
import { Redis } from "ioredis";
import { PostgresServer } from "../../support/postgres-server.mjs";
import { onCleanup } from "../lib/cleanup.mjs";
import { QUICK } from "../lib/config.mjs";
import { median, percentile } from "../lib/stats.mjs";
import { measureStoreContention, renderStoreContention, withShareOfLimit } from "../lib/store-contention.mjs";
import { handoff, sequential } from "../lib/store-loops.mjs";
import { now } from "../lib/timing.mjs";

const CONFIG = QUICK
  ? { rounds: 2, opsPerRound: 300, handoffReps: 20, concurrency: 8, concurrentOps: 800 }
  : { rounds: 5, opsPerRound: 2000, handoffReps: 100, concurrency: 8, concurrentOps: 4000 };

/** `concurrency` loops on distinct keys, `ops` lock + release in all; ops/s. */
async function concurrent(lockOnce, concurrency, ops) {
  let left = ops;
  const start = now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, index) => {
      while (left-- > 0) await lockOnce(index);
    }),
  );
  return (ops * 1000) / (now() - start);
}

const LOCK = "SELECT pg_try_advisory_lock($1::bigint) AS ok";
const UNLOCK = "SELECT pg_advisory_unlock($1::bigint) AS ok";
/** The raw contended floor's key: waits in PostgreSQL's own queue. */
const BLOCKING_LOCK = "SELECT pg_advisory_lock($1::bigint)";
const CONTENDED_KEY_ID = 4242;

/** The contenders of the contended rows, on `server`: each session its own pool. */
function contendedContenders(server) {
  return [
    {
      id: "postgres",
      label: "PostgresLocker",
      open() {
        const made = server.pool({ max: 4 });
        const locker = new PostgresLocker(made);
        return {
          lock: (key) => locker.lock(undefined, key),
          close: async () => {
            await locker.close();
            await made.end();
          },
        };
      },
    },
    {
      id: "pg-raw-blocking",
      label: "raw floor: pg_advisory_lock (blocking) + pg_advisory_unlock, a connection per worker",
      async open() {
        const made = server.pool({ max: 1 });
        const client = await made.connect();
        return {
          async lock() {
            await client.query(BLOCKING_LOCK, [CONTENDED_KEY_ID]);
            return () => client.query(UNLOCK, [CONTENDED_KEY_ID]);
          },
          close: async () => {
            client.release();
            await made.end();
          },
        };
      },
    },
  ];
}

/** Runs the scenario; `context.port` is the benchmark's Redis. */
export async function runPostgres(context) {
  const log = context.log ?? (() => undefined);
  const server = await PostgresServer.start();
  onCleanup(() => server.killSync());
  const pools = [];
  const pool = (max) => {
    const made = server.pool({ max });
    pools.push(made);
    return made;
  };
  const redisClients = [
    new Redis({ port: context.port, host: "127.0.0.1" }),
    new Redis({ port: context.port, host: "127.0.0.1" }),
  ];
  try {
    const redisA = new RedisLocker(redisClients[0]);
    const redisB = new RedisLocker(redisClients[1]);
    const pgA = new PostgresLocker(pool(4));
    const pgB = new PostgresLocker(pool(4));
    const rawPool = pool(10);
    const rawClient = await rawPool.connect();
    // One statement at a time on the multiplexed connection, in call order (as PostgresLocker does).
    let tail = Promise.resolve();
    const serial = (text, values) => {
      const run = tail.then(() => rawClient.query(text, values));
      tail = run.catch(() => undefined);
      return run;
    };
    const contenders = [
      { id: "redis", label: "RedisLocker", once: async () => (await redisA.lock(undefined, "k"))() },
      { id: "postgres", label: "PostgresLocker", once: async () => (await pgA.lock(undefined, "k"))() },
      {
        id: "pg-raw-dedicated",
        label: "raw PostgreSQL, dedicated connection per lock",
        once: async (index = 0) => {
          const client = await rawPool.connect();
          await client.query(LOCK, [index + 1]);
          await client.query(UNLOCK, [index + 1]);
          client.release();
        },
      },
      {
        id: "pg-raw-multiplexed",
        label: "raw PostgreSQL, one multiplexed connection",
        once: async (index = 0) => {
          await serial(LOCK, [index + 101]);
          await serial(UNLOCK, [index + 101]);
        },
      },
    ];
    const samples = Object.fromEntries(contenders.map((c) => [c.id, { latency: [], opsPerSec: [], concurrent: [] }]));
    for (const c of contenders) await sequential(c.once, 100); // warm-up
    for (let round = 0; round < CONFIG.rounds; round++) {
      for (const c of contenders) {
        const result = await sequential(c.once, CONFIG.opsPerRound);
        samples[c.id].latency.push(...result.samples);
        samples[c.id].opsPerSec.push(result.opsPerSec);
        if (c.id.startsWith("pg-raw")) {
          samples[c.id].concurrent.push(await concurrent(c.once, CONFIG.concurrency, CONFIG.concurrentOps));
        }
      }
    }
    const handoffs = { redis: [], postgres: [] };
    for (let round = 0; round < CONFIG.rounds; round++) {
      handoffs.redis.push(...(await handoff(redisA, redisB, Math.ceil(CONFIG.handoffReps / CONFIG.rounds))));
      handoffs.postgres.push(...(await handoff(pgA, pgB, Math.ceil(CONFIG.handoffReps / CONFIG.rounds))));
    }
    rawClient.release();
    const tPairMs = median(samples.postgres.latency);
    const contended = withShareOfLimit(
      await measureStoreContention(contendedContenders(server), "contended", (line) => log(`postgres: ${line}`)),
      tPairMs,
    );
    // Connections each model needs to hold 50 locks at once.
    const connectionsFor50 = { dedicated: 50, multiplexed: 1 };
    await Promise.all([redisA.close(), redisB.close(), pgA.close(), pgB.close()]);
    const version = (await server.query("SHOW server_version"))[0]?.server_version;
    return {
      postgresVersion: version,
      config: CONFIG,
      uncontended: contenders.map((c) => ({
        id: c.id,
        label: c.label,
        p50Us: median(samples[c.id].latency) * 1000,
        p99Us: percentile(samples[c.id].latency, 99) * 1000,
        opsPerSec: median(samples[c.id].opsPerSec),
        concurrentOpsPerSec: samples[c.id].concurrent.length > 0 ? median(samples[c.id].concurrent) : undefined,
      })),
      handoff: Object.entries(handoffs).map(([id, values]) => ({
        id,
        label: id === "redis" ? "RedisLocker" : "PostgresLocker",
        p50Us: median(values) * 1000,
        p99Us: percentile(values, 99) * 1000,
        reps: values.length,
      })),
      connectionsFor50,
      contended,
    };
  } finally {
    for (const client of redisClients) client.disconnect();
    await Promise.allSettled(pools.map((made) => made.end()));
    await server.stop();
  }
}

const us = (value) => (value === undefined ? "–" : `${Math.round(value)} µs`);
const perSec = (value) => (value === undefined ? "–" : `${Math.round(value).toLocaleString("en-US")}`);

/** The scenario's Markdown section. */
export function renderPostgres(results) {
  const lines = [
    `## 9. PostgreSQL beside Redis (PostgreSQL ${results.postgresVersion})`,
    "",
    "| contender | acquire + release p50 | p99 | ops/s (sequential) | ops/s (8 keys at once) |",
    "| --- | --- | --- | --- | --- |",
    ...results.uncontended.map(
      (r) =>
        `| ${r.label} | ${us(r.p50Us)} | ${us(r.p99Us)} | ${perSec(r.opsPerSec)} | ${perSec(r.concurrentOpsPerSec)} |`,
    ),
    "",
    "| hand-off (B in same process, its own locker) | p50 | p99 | reps |",
    "| --- | --- | --- | --- |",
    ...results.handoff.map((r) => `| ${r.label} | ${us(r.p50Us)} | ${us(r.p99Us)} | ${r.reps} |`),
    "",
    `Pool connections to hold 50 locks: dedicated ${results.connectionsFor50.dedicated}, multiplexed ${results.connectionsFor50.multiplexed} (PostgresLocker multiplexes).`,
    ...(results.contended === undefined ? [] : ["", ...renderStoreContention(results.contended)]),
  ];
  return lines.join("\n");
}
