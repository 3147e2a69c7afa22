/**
 * The raw floors of the newer stores: what each of their lockers sends for an uncontended lock +
 * release, sent by hand on the caller's own pool, database or client, and nothing else (no
 * deadline, no lease keeping, no waiting, no retry). Shared by the callgrind counts
 * (bench/lib/store-modes.mjs) and the wall-clock scenarios (bench/scenarios/table.mjs,
 * zookeeper.mjs, memcached.mjs), so both compare the locker with the same floor. This module
 * imports no client library: each floor takes the client it runs on.
 *
 * - Table lockers (PostgresTableLocker, MySqlTableLocker, SqliteLocker): the statements of an
 *   attempt that finds the key free (src/table/plans.ts `attemptPlan`: the key's lock row, the key's
 *   rows, the insert, in one transaction) and of a release that finds its row (`removePlan`),
 *   verbatim from src/table/*-dialect.ts, on a connection taken from the pool for each (as the
 *   dialects take one). The tables are the lockers' (made by a locker before the floor runs).
 * - ZooKeeper: an ephemeral sequential node created under a key node made once, the key node's
 *   children read in the same round trip (pipelined, as the locker does), the node deleted.
 * - Memcached: `add` with a fresh token; a release reads it back with its CAS unique (`gets`),
 *   compares the token and deletes it with `cas` stored expired (a compare-and-delete), as the
 *   locker's release does.
 *
 * Each floor has the shape of a locker for the loops that run it: `lock(signal, key)` resolves to
 * the release function, and throws when the key was found taken (a floor does not wait).
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/** Lease length of every floor (ms): the lockers' default expiry. */
const LEASE_MS = 30_000;
/** The lockers' default lease table (src/table/options.ts). */
const TABLE = "globallock_leases";
/** The owner a locker writes by default (src/locker-options.ts). */
const OWNER = `${hostname()}:${process.pid}`;

/** A fresh 16-byte token, as 32 hex characters (the lockers' own tokens are the same size). */
const token = () => randomBytes(16).toString("hex");

/** The error a floor throws when it finds its key taken: a floor does not wait. */
function taken(what) {
  return new Error(`the floor found ${what} taken (floors do not wait)`);
}

/** Whether a table's key rows (the clock and its leases, as `rows` answers) hold an unexpired lease. */
function heldIn(rows) {
  return rows.some((row) => row.token !== null && row.token !== undefined && Number(row.expires_at) > Number(row.now));
}

/** PostgresDialect's clock (src/table/postgres-dialect.ts). */
const PG_NOW = "(extract(epoch from statement_timestamp()) * 1000)::bigint";
const PG = {
  lock: `INSERT INTO "${TABLE}_keys" (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name WHERE false`,
  rows:
    `SELECT n.now, l.id::text AS id, l.token, l.owner, l.weight, l.expires_at FROM (SELECT ${PG_NOW} AS now) n ` +
    `LEFT JOIN "${TABLE}" l ON l.name = $1 ORDER BY l.id`,
  insert:
    `INSERT INTO "${TABLE}" (name, token, owner, weight, expires_at) VALUES ($1, $2, $3, $4, ${PG_NOW} + $5) ` +
    "RETURNING id::text AS id",
  remove:
    `WITH gone AS (DELETE FROM "${TABLE}" WHERE token = $2 RETURNING expires_at > ${PG_NOW} AS live), ` +
    `pruned AS (DELETE FROM "${TABLE}_keys" k WHERE k.name IN (SELECT name FROM "${TABLE}_keys" WHERE name = $1 FOR UPDATE SKIP LOCKED) ` +
    `AND EXISTS (SELECT 1 FROM gone) AND NOT EXISTS (SELECT 1 FROM "${TABLE}" l WHERE l.name = $1 AND l.token <> $2)) ` +
    "SELECT live FROM gone",
};

/**
 * PostgresTableLocker's statements by hand on `pool` (a `pg.Pool`): an attempt's transaction on one
 * pooled connection (BEGIN, the key's lock row, its rows, the insert, COMMIT), then the release's
 * one statement on another. Names are the locker's (`globallock:` + key).
 */
export function postgresTableFloor(pool) {
  const query = (client, text, values) => client.query({ text, values }).then((result) => result.rows);
  return {
    async lock(_signal, key) {
      const name = `globallock:${key}`;
      const own = token();
      const client = await pool.connect();
      try {
        await query(client, "BEGIN", []);
        await query(client, PG.lock, [name]);
        if (heldIn(await query(client, PG.rows, [name]))) throw taken(name);
        await query(client, PG.insert, [name, own, OWNER, 1, LEASE_MS]);
        await query(client, "COMMIT", []);
      } catch (error) {
        client.release(error);
        throw error;
      }
      client.release();
      return async () => {
        const releasing = await pool.connect();
        try {
          await query(releasing, PG.remove, [name, own]);
        } finally {
          releasing.release();
        }
      };
    },
    async close() {},
  };
}

/** MySqlDialect's clock (src/table/mysql-dialect.ts). */
const MY_NOW = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";
const MY = {
  lock: `INSERT INTO \`${TABLE}_keys\` (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name`,
  rows:
    `SELECT ${MY_NOW} AS now, CAST(l.id AS CHAR) AS id, l.token, l.owner, l.weight, l.expires_at ` +
    `FROM (SELECT 1 AS one) n LEFT JOIN \`${TABLE}\` l ON l.name = ? ORDER BY l.id`,
  insert: `INSERT INTO \`${TABLE}\` (name, token, owner, weight, expires_at) VALUES (?, ?, ?, ?, ${MY_NOW} + ?)`,
  removeLive: `DELETE FROM \`${TABLE}\` WHERE token = ? AND expires_at > ${MY_NOW}`,
  dropKey: `DELETE FROM \`${TABLE}_keys\` WHERE name = ? AND NOT EXISTS (SELECT 1 FROM \`${TABLE}\` WHERE name = ?)`,
};

/**
 * MySqlTableLocker's statements by hand on `pool` (a `mysql2/promise` pool): START TRANSACTION,
 * the key's lock row, its rows, the insert, COMMIT on one pooled connection; the release's delete
 * of the unexpired row and of the emptied key's lock row on another.
 */
export function mySqlTableFloor(pool) {
  return {
    async lock(_signal, key) {
      const name = `globallock:${key}`;
      const own = token();
      const connection = await pool.getConnection();
      try {
        await connection.query("START TRANSACTION");
        await connection.query(MY.lock, [name]);
        if (heldIn((await connection.query(MY.rows, [name]))[0])) throw taken(name);
        await connection.query(MY.insert, [name, own, OWNER, 1, LEASE_MS]);
        await connection.query("COMMIT");
      } catch (error) {
        connection.destroy();
        throw error;
      }
      connection.release();
      return async () => {
        const releasing = await pool.getConnection();
        try {
          const [gone] = await releasing.query(MY.removeLive, [own]);
          if (gone.affectedRows !== 1) throw new Error(`the floor's row of ${name} was gone at its release`);
          await releasing.query(MY.dropKey, [name, name]);
        } finally {
          releasing.release();
        }
      };
    },
    async close() {},
  };
}

/** SqliteDialect's clock (src/table/sqlite-dialect.ts). */
const LITE_NOW = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/**
 * SqliteLocker's statements by hand on `db` (an open `better-sqlite3` Database), prepared once as
 * the locker caches them: BEGIN IMMEDIATE, the key's rows, the insert, COMMIT; the release's
 * delete.
 */
export function sqliteFloor(db) {
  const begin = db.prepare("BEGIN IMMEDIATE");
  const commit = db.prepare("COMMIT");
  const rollBack = db.prepare("ROLLBACK");
  const rows = db.prepare(
    `SELECT n.now, l.id, l.token, l.owner, l.weight, l.expires_at FROM (SELECT ${LITE_NOW} AS now) n ` +
      `LEFT JOIN "${TABLE}" l ON l.name = ? ORDER BY l.id`,
  );
  rows.safeIntegers(true);
  const insert = db.prepare(
    `INSERT INTO "${TABLE}" (name, token, owner, weight, expires_at) VALUES (?, ?, ?, ?, ${LITE_NOW} + ?)`,
  );
  const remove = db.prepare(`DELETE FROM "${TABLE}" WHERE token = ? RETURNING expires_at > ${LITE_NOW} AS live`);
  return {
    async lock(_signal, key) {
      const name = `globallock:${key}`;
      const own = token();
      begin.run();
      try {
        if (heldIn(rows.all(name))) throw taken(name);
        insert.run(name, own, OWNER, 1, LEASE_MS);
        commit.run();
      } catch (error) {
        if (db.inTransaction) rollBack.run();
        throw error;
      }
      return async () => {
        if (remove.get(own) === undefined) throw new Error(`the floor's row of ${name} was gone at its release`);
      };
    },
    async close() {},
  };
}

/** node-zookeeper-client's CreateMode.EPHEMERAL_SEQUENTIAL. */
const EPHEMERAL_SEQUENTIAL = 3;

/** A call of node-zookeeper-client's callback style as a promise. */
function zk(call) {
  return new Promise((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

/**
 * ZooKeeperLocker's recipe by hand on `client` (a connected node-zookeeper-client): under the key
 * node `<parent>/<key>` (made once, at the key's first lock, and kept), an ephemeral sequential
 * node created and the key node's children read, pipelined (one round trip); the node holds when
 * it is the first child; the release deletes it.
 */
export function zooKeeperFloor(client, parent = "/globallock-floor") {
  const data = Buffer.from(OWNER, "utf8");
  const made = new Set();
  return {
    async lock(_signal, key) {
      const keyNode = `${parent}/${key}`;
      if (!made.has(keyNode)) {
        await zk((done) => client.mkdirp(keyNode, done));
        made.add(keyNode);
      }
      const creating = zk((done) => client.create(`${keyNode}/${token()}-`, data, EPHEMERAL_SEQUENTIAL, done));
      const reading = zk((done) => client.getChildren(keyNode, done));
      reading.catch(() => undefined);
      const path = await creating;
      const children = await reading;
      const sequenceOf = (name) => name.slice(-10);
      const first = children.reduce((a, b) => (sequenceOf(a) <= sequenceOf(b) ? a : b));
      if (`${keyNode}/${first}` !== path) {
        await zk((done) => client.remove(path, done));
        throw taken(keyNode);
      }
      return () => zk((done) => client.remove(path, done));
    },
    async close() {},
  };
}

/** Memcached's TTL of a lease (src/memcached/layout.ts `ttlSecondsOf`). */
const MEMCACHED_TTL = Math.ceil(LEASE_MS / 1000) + 2;

/**
 * MemcachedLocker's commands by hand on `client` (a `memcached` client): `add` of a fresh token;
 * the release's `gets`, the token compared, and `cas` stored expired. Items are named as the
 * locker names them (`globallock:` + key).
 */
export function memcachedFloor(client) {
  const call = (method, ...args) =>
    new Promise((resolve, reject) =>
      client[method](...args, (error, value) =>
        error === undefined || error === null ? resolve(value) : reject(error),
      ),
    );
  return {
    async lock(_signal, key) {
      const name = `globallock:${key}`;
      const own = token();
      if ((await call("add", name, own, MEMCACHED_TTL)) !== true) throw taken(name);
      return async () => {
        const found = await call("gets", name);
        if (found?.[name] !== own) throw new Error(`the floor's item ${name} was not its own at its release`);
        await call("cas", name, "", found.cas, -1);
      };
    },
    async close() {},
  };
}
