/**
 * bench/instructions.mjs's modes of the newer stores, each locker beside its raw floor
 * (bench/lib/store-floors.mjs) on the same kind of client: `postgres-table` / `postgres-table-raw`,
 * `mysql-table` / `mysql-table-raw` (MariaDB), `sqlite` / `sqlite-raw`, `zookeeper` /
 * `zookeeper-raw`, `memcached` / `memcached-raw`. The parent starts the mode's server
 * ({@link startStoreServer}: the repository's launchers in support/, a temp dir, a free loopback
 * port); the child opens the locker or the floor on it ({@link openStoreMode}) and counts the
 * store operations it sends (statements, ZooKeeper requests, Memcached commands) by wrapping the
 * client's own methods, which the locker and the floor both go through.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memcachedFloor, mySqlTableFloor, postgresTableFloor, sqliteFloor, zooKeeperFloor } from "./store-floors.mjs";

/** Each mode's server: what the parent starts before counting it (SQLite needs none). */
const SERVERS = {
  "postgres-table": "postgres",
  "postgres-table-raw": "postgres",
  "mysql-table": "mariadb",
  "mysql-table-raw": "mariadb",
  sqlite: undefined,
  "sqlite-raw": undefined,
  zookeeper: "zookeeper",
  "zookeeper-raw": "zookeeper",
  memcached: "memcached",
  "memcached-raw": "memcached",
};

/** Every mode of this module. */
export const STORE_MODES = new Set(Object.keys(SERVERS));

/** The item whose presence tells a MemcachedLocker its server kept its items (src/memcached/layout.ts). */
const MEMCACHED_EPOCH = "globallock:#epoch";

/**
 * Starts the server `mode` needs, or none: `{ port, stop() }`, `port` a string ("" for none).
 * A Memcached server is marked as having kept its items (the epoch item written): a server that
 * starts for the first time is, to a locker, one that lost them, and it grants nothing for a lease.
 * @param {string} mode
 */
export async function startStoreServer(mode) {
  const kind = SERVERS[mode];
  if (kind === "postgres") {
    const { PostgresServer } = await import("../../support/postgres-server.mjs");
    return serverOf(await PostgresServer.start(), (server) => server.port);
  }
  if (kind === "mariadb") {
    const { MariaDbServer } = await import("../../support/mariadb-server.mjs");
    return serverOf(await MariaDbServer.start(), (server) => server.port);
  }
  if (kind === "zookeeper") {
    const { ZooKeeperEnsemble } = await import("../../support/zookeeper-server.mjs");
    return serverOf(await ZooKeeperEnsemble.start(), (ensemble) => ensemble.members[0].clientPort);
  }
  if (kind === "memcached") {
    const { MemcachedServer } = await import("../../support/memcached-server.mjs");
    const server = await MemcachedServer.start();
    await server.command(`set ${MEMCACHED_EPOCH} 0 0 1\r\n1`);
    return serverOf(server, (started) => started.port);
  }
  return { port: "", stop: async () => {} };
}

function serverOf(server, portOf) {
  return { port: String(portOf(server)), stop: () => server.stop() };
}

/** Calls `counted` at each call of `methods` of `prototype` (once per process: the child opens one mode). */
function countCalls(prototype, methods, counted) {
  for (const method of methods) {
    const original = prototype[method];
    prototype[method] = function countedCall(...args) {
      counted();
      return original.apply(this, args);
    };
  }
}

/**
 * Opens `mode` on the server at `port` (the child's side): `{ locker, cleanUp }`, the locker shaped
 * as the instructions loop runs it; `counted` is called at every store operation sent.
 * @param {string} mode
 * @param {string} port
 * @param {Record<string, any>} lib the built package (dist/esm/index.js)
 * @param {() => void} counted
 */
export async function openStoreMode(mode, port, lib, counted) {
  const raw = mode.endsWith("-raw");
  if (mode.startsWith("postgres-table")) {
    const { default: pg } = await import("pg");
    countCalls(pg.Client.prototype, ["query"], counted);
    const pool = new pg.Pool({ host: "127.0.0.1", port: Number(port), user: "postgres", database: "postgres", max: 2 });
    const locker = new lib.PostgresTableLocker(pool);
    return opened(locker, raw && (() => postgresTableFloor(pool)), () => pool.end());
  }
  if (mode.startsWith("mysql-table")) {
    const mysql = await import("mysql2/promise");
    const core = await import("mysql2");
    countCalls(core.default.Connection.prototype, ["query"], counted);
    const pool = mysql.createPool({
      host: "127.0.0.1",
      port: Number(port),
      user: "root",
      database: "globallock",
      connectionLimit: 2,
    });
    const locker = new lib.MySqlTableLocker(pool);
    return opened(locker, raw && (() => mySqlTableFloor(pool)), () => pool.end());
  }
  if (mode.startsWith("sqlite")) {
    const { default: Database } = await import("better-sqlite3");
    const directory = mkdtempSync(join(tmpdir(), "globallock-callgrind-sqlite-"));
    // As SqliteLocker opens a path: WAL, a 10 ms busy timeout. Both the locker and the floor use it.
    const db = new Database(join(directory, "locks.db"), { timeout: 10 });
    db.pragma("journal_mode = WAL");
    countCalls(Object.getPrototypeOf(db.prepare("SELECT 1")), ["run", "get", "all"], counted);
    const locker = new lib.SqliteLocker(db);
    return opened(locker, raw && (() => sqliteFloor(db)), () => {
      db.close();
      rmSync(directory, { recursive: true, force: true });
    });
  }
  if (mode.startsWith("zookeeper")) {
    const { default: zookeeper } = await import("node-zookeeper-client");
    const client = zookeeper.createClient(`127.0.0.1:${port}`, { sessionTimeout: 30_000, spinDelay: 100 });
    const connected = new Promise((resolve) => client.once("connected", resolve));
    client.connect();
    await connected;
    countCalls(Object.getPrototypeOf(client), ["create", "remove", "getChildren", "exists", "getData"], counted);
    const locker = new lib.ZooKeeperLocker(client);
    return opened(locker, raw && (() => zooKeeperFloor(client)), () => client.close());
  }
  if (mode.startsWith("memcached")) {
    const { default: Memcached } = await import("memcached");
    countCalls(Memcached.prototype, ["command"], counted);
    const client = new Memcached(`127.0.0.1:${port}`, { ...lib.MEMCACHED_CLIENT_OPTIONS });
    const locker = new lib.MemcachedLocker(client);
    return opened(locker, raw && (() => memcachedFloor(client)), () => client.end());
  }
  throw new Error(`not a mode of store-modes.mjs: ${mode}`);
}

/**
 * The mode's locker: the store's locker itself, or its floor (`makeFloor`, when not false) — made
 * after one lock + release of the locker (which makes the lease tables the table floors write to)
 * and the locker closed.
 */
async function opened(locker, makeFloor, end) {
  if (makeFloor === false) return { locker, cleanUp: async () => end() };
  await (await locker.lock(undefined, "tables"))();
  await locker.close();
  return { locker: makeFloor(), cleanUp: async () => end() };
}
