/**
 * Scenario 10: MySqlLocker against its raw floor, on a MariaDB this scenario starts.
 *
 * - Uncontended: sequential lock + release on one key; p50/p99 of one acquire + release and ops/s,
 *   for MySqlLocker (default options, a `mysql2/promise` pool of its own), its raw floor
 *   (`GET_LOCK(name, 0)` + `RELEASE_LOCK(name)` on one connection), and the other mechanism the
 *   issue asked to measure: a lease table (an upsert that takes an expired or missing row, a
 *   compare-and-delete), raw too.
 * - Hand-off: A holds, B (another locker: its own pool and connections, as another process would)
 *   waits in lock(); A releases at t0 (just before calling release), B's lock resolves at t1;
 *   latency t1 − t0. Once with B's probes (the default), once with `watchConnections: 0` (B only
 *   polls: jittered backoff from 50 ms).
 * - Contended (bench/lib/store-contention.mjs): 8 workers on one key, each with its own
 *   MySqlLocker (a pool of its own), beside the raw floor: a blocking `GET_LOCK(name, 60)` on a
 *   dedicated connection per worker (the server's own wait queue) and `RELEASE_LOCK(name)`.
 *
 * It starts its own MariaDB (support/mariadb-server.mjs: a temp dir, a free loopback port) and
 * stops it at the end. Rounds interleave the contenders. Runnable alone:
 * `node bench/scenarios/mysql.mjs` (after `npm run build`).
 */
import { randomBytes } from "node:crypto";
import { MySqlLocker } from "globallock";
import { MariaDbServer, mariaDbVersion } from "../../support/mariadb-server.mjs";
import { onCleanup } from "../lib/cleanup.mjs";
import { QUICK } from "../lib/config.mjs";
import { median, percentile } from "../lib/stats.mjs";
import { measureStoreContention, renderStoreContention, withShareOfLimit } from "../lib/store-contention.mjs";
import { handoff, sequential } from "../lib/store-loops.mjs";

const CONFIG = QUICK
  ? { rounds: 2, opsPerRound: 300, handoffReps: 20 }
  : { rounds: 5, opsPerRound: 2000, handoffReps: 100 };

const LEASE_TABLE = `CREATE TABLE IF NOT EXISTS bench_leases (name VARCHAR(255) NOT NULL PRIMARY KEY,
  token BINARY(16) NOT NULL, expires_at DATETIME(3) NOT NULL) ENGINE=InnoDB`;
/** Takes the row when it is missing or expired: affectedRows 1 (inserted) or 2 (updated); 0 when held. */
const LEASE_TAKE = `INSERT INTO bench_leases (name, token, expires_at) VALUES (?, ?, NOW(3) + INTERVAL 30 SECOND)
  ON DUPLICATE KEY UPDATE token = IF(expires_at < NOW(3), VALUES(token), token),
  expires_at = IF(expires_at < NOW(3), VALUES(expires_at), expires_at)`;
const LEASE_DROP = "DELETE FROM bench_leases WHERE name = ? AND token = ?";

/** The contenders of the contended rows, on `server`: each session its own pool. */
function contendedContenders(server) {
  return [
    {
      id: "mysql",
      label: "MySqlLocker",
      open() {
        const made = server.pool({ connectionLimit: 4 });
        const locker = new MySqlLocker(made);
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
      id: "get-lock-blocking",
      label: "raw floor: GET_LOCK (blocking) + RELEASE_LOCK, a connection per worker",
      async open() {
        const made = server.pool({ connectionLimit: 1 });
        const connection = await made.getConnection();
        return {
          async lock(key) {
            const [rows] = await connection.query("SELECT GET_LOCK(?, 60) AS ok", [key]);
            if (rows[0]?.ok !== 1) return undefined;
            return () => connection.query("SELECT RELEASE_LOCK(?)", [key]);
          },
          close: async () => {
            connection.release();
            await made.end();
          },
        };
      },
    },
  ];
}

/** Runs the scenario. */
export async function runMySql(context = {}) {
  const log = context.log ?? (() => undefined);
  const server = await MariaDbServer.start();
  onCleanup(() => server.killSync());
  const pools = [];
  const pool = (connectionLimit) => {
    const made = server.pool({ connectionLimit });
    pools.push(made);
    return made;
  };
  try {
    const lockerA = new MySqlLocker(pool(4));
    const lockerB = new MySqlLocker(pool(4));
    const pollerB = new MySqlLocker(pool(4), { watchConnections: 0 });
    const raw = await pool(2).getConnection();
    await raw.query(LEASE_TABLE);
    const token = randomBytes(16);
    const contenders = [
      { id: "mysql", label: "MySqlLocker", once: async () => (await lockerA.lock(undefined, "k"))() },
      {
        id: "get-lock",
        label: "raw GET_LOCK + RELEASE_LOCK, one connection",
        once: async () => {
          await raw.query("SELECT GET_LOCK(?, 0)", ["bench-raw"]);
          await raw.query("SELECT RELEASE_LOCK(?)", ["bench-raw"]);
        },
      },
      {
        id: "lease-table",
        label: "raw lease table (upsert + delete), one connection",
        once: async () => {
          const [taken] = await raw.query(LEASE_TAKE, ["bench-raw", token]);
          if (taken.affectedRows === 0) throw new Error("the lease row was held");
          await raw.query(LEASE_DROP, ["bench-raw", token]);
        },
      },
    ];
    const samples = Object.fromEntries(contenders.map((c) => [c.id, { latency: [], opsPerSec: [] }]));
    for (const c of contenders) await sequential(c.once, 100); // warm-up
    for (let round = 0; round < CONFIG.rounds; round++) {
      for (const c of contenders) {
        const result = await sequential(c.once, CONFIG.opsPerRound);
        samples[c.id].latency.push(...result.samples);
        samples[c.id].opsPerSec.push(result.opsPerSec);
      }
    }
    const handoffs = { probe: [], poll: [] };
    const perRound = Math.ceil(CONFIG.handoffReps / CONFIG.rounds);
    for (let round = 0; round < CONFIG.rounds; round++) {
      handoffs.probe.push(...(await handoff(lockerA, lockerB, perRound, `probe-${round}`)));
      handoffs.poll.push(...(await handoff(lockerA, pollerB, perRound, `poll-${round}`)));
    }
    raw.release();
    await Promise.all([lockerA.close(), lockerB.close(), pollerB.close()]);
    const floor = median(samples["get-lock"].latency);
    const contended = withShareOfLimit(
      await measureStoreContention(contendedContenders(server), "contended", (line) => log(`mysql: ${line}`)),
      median(samples.mysql.latency),
    );
    return {
      mariaDbVersion: mariaDbVersion(),
      config: CONFIG,
      uncontended: contenders.map((c) => ({
        id: c.id,
        label: c.label,
        p50Us: median(samples[c.id].latency) * 1000,
        p99Us: percentile(samples[c.id].latency, 99) * 1000,
        opsPerSec: median(samples[c.id].opsPerSec),
        ratioToFloor: median(samples[c.id].latency) / floor,
      })),
      handoff: Object.entries(handoffs).map(([id, values]) => ({
        id,
        label: id === "probe" ? "MySqlLocker (probe connections)" : "MySqlLocker, watchConnections: 0 (polling)",
        p50Us: median(values) * 1000,
        p99Us: percentile(values, 99) * 1000,
        reps: values.length,
      })),
      contended,
    };
  } finally {
    await Promise.allSettled(pools.map((made) => made.end()));
    await server.stop();
  }
}

const us = (value) => (value === undefined ? "–" : `${Math.round(value)} µs`);
const perSec = (value) => (value === undefined ? "–" : `${Math.round(value).toLocaleString("en-US")}`);

/** The scenario's Markdown section. */
export function renderMySql(results) {
  const lines = [
    `## 10. MySQL (MariaDB ${results.mariaDbVersion})`,
    "",
    "| contender | acquire + release p50 | p99 | ops/s (sequential) | p50 / GET_LOCK floor |",
    "| --- | --- | --- | --- | --- |",
    ...results.uncontended.map(
      (r) =>
        `| ${r.label} | ${us(r.p50Us)} | ${us(r.p99Us)} | ${perSec(r.opsPerSec)} | ${r.ratioToFloor.toFixed(2)}x |`,
    ),
    "",
    "| hand-off (B: another locker, its own pool) | p50 | p99 | reps |",
    "| --- | --- | --- | --- |",
    ...results.handoff.map((r) => `| ${r.label} | ${us(r.p50Us)} | ${us(r.p99Us)} | ${r.reps} |`),
    ...(results.contended === undefined ? [] : ["", ...renderStoreContention(results.contended)]),
  ];
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(renderMySql(await runMySql()));
}
