/**
 * Scenario 13: the table lockers (PostgresTableLocker, MySqlTableLocker on MariaDB, SqliteLocker)
 * against their raw floors, each on a database this scenario starts (support/postgres-server.mjs,
 * support/mariadb-server.mjs: temp dirs, free loopback ports; an SQLite file in a temp dir).
 *
 * - Uncontended (bench/lib/floor-rows.mjs): sequential lock + release on one key, the locker
 *   (default options) and its floor — the same statements sent by hand (bench/lib/store-floors.mjs)
 *   — on the same pool (SQLite: the same Database), interleaved rounds; the rate as a ratio to the
 *   floor's.
 * - Contended (bench/lib/store-contention.mjs): 8 workers on one key, each with its own locker.
 *   PostgreSQL and MySQL twice: one pool for the 8 (lockers of this process on one pool and table
 *   hear each other's releases), and a pool per locker, as separate processes would have (a table
 *   cannot notify: waiters poll, so this row gets one long window: see POLLING). SQLite: each
 *   locker opens the file itself (lockers of this process on one file hear each other's releases).
 *
 * Runnable alone after `npm run build`: `BENCH_ONLY=postgres-table,mysql-table,sqlite node bench/run.mjs`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { MySqlTableLocker, PostgresTableLocker, SqliteLocker } from "globallock";
import { MariaDbServer, mariaDbVersion } from "../../support/mariadb-server.mjs";
import { PostgresServer } from "../../support/postgres-server.mjs";
import { onCleanup } from "../lib/cleanup.mjs";
import { QUICK } from "../lib/config.mjs";
import { measureAgainstFloor, pairOn, renderStoreSection } from "../lib/floor-rows.mjs";
import { measureStoreContention, STORE_CONTENTION, withShareOfLimit } from "../lib/store-contention.mjs";
import { mySqlTableFloor, postgresTableFloor, sqliteFloor } from "../lib/store-floors.mjs";

const CONFIG = QUICK
  ? { rounds: 2, opsPerRound: 300, warmUpOps: 100 }
  : { rounds: 5, opsPerRound: 2000, warmUpOps: 300 };

/**
 * The contended rows of lockers on a pool each: their waiters poll (50 ms doubling to 1 s), and a
 * key's rows are served in arrival order, so the next holder takes the key at its next poll — a
 * few hand-offs a second. One long window, so that each worker gets several, and a drain long
 * enough for every queued waiter's turn.
 */
const POLLING = QUICK
  ? { ...STORE_CONTENTION, rounds: 1, durationMs: 4000, drainMs: 12_000 }
  : { ...STORE_CONTENTION, rounds: 1, durationMs: 20_000, drainMs: 15_000 };

/**
 * A contended contender whose sessions each get a locker made by `makeLocker(pool)`: on a pool of
 * its own (`shared` false), or on one pool for every session of the round (made at the first
 * session, ended when the last one closes).
 */
function lockerContender(id, label, makePool, makeLocker, shared) {
  let common;
  let open = 0;
  return {
    id,
    label,
    open() {
      if (shared) common ??= makePool();
      const pool = shared ? common : makePool();
      open += 1;
      const locker = makeLocker(pool);
      return {
        lock: (key) => locker.lock(undefined, key),
        async close() {
          await locker.close();
          open -= 1;
          if (!shared) await pool.end();
          else if (open === 0) {
            common = undefined;
            await pool.end();
          }
        },
      };
    },
  };
}

/**
 * One table store's rows: `locker` and `floor` (on the same pool, or the same Database: `on`)
 * uncontended, then `contenders`, and `polling` (if any) with the {@link POLLING} settings; t_pair
 * is the locker's uncontended p50. Closes `locker`.
 */
async function tableRows({ name, locker, floor, contenders, polling, log, on = "pool" }) {
  const uncontended = await measureAgainstFloor(
    [
      pairOn("locker", name, locker, "k"),
      pairOn("floor", `raw floor: the same statements by hand, same ${on}`, floor, "floor", true),
    ],
    CONFIG,
  );
  await locker.close();
  const tPairMs = uncontended[0].p50Us / 1000;
  const say = (line) => log(`${name}: ${line}`);
  const contended = withShareOfLimit(await measureStoreContention(contenders, "contended", say), tPairMs);
  if (polling === undefined) return { uncontended, contended };
  const polled = withShareOfLimit(await measureStoreContention(polling, "polled", say, POLLING), tPairMs);
  return { uncontended, contended, polling: polled, pollingSettings: POLLING };
}

/**
 * The rows of a table locker on a database server (`Locker`: PostgresTableLocker or
 * MySqlTableLocker); `poolOf(size)` makes a pool of that many connections on `server`, `floorOf`
 * the floor on a pool. Stops `server`.
 */
async function serverTableRows({ server, name, Locker, poolOf, floorOf, store, log }) {
  const pool = poolOf(4);
  try {
    const locker = new Locker(pool);
    // The tables, made by the locker before its floor writes to them.
    await (await locker.lock(undefined, "tables"))();
    const rows = await tableRows({
      name,
      locker,
      floor: floorOf(pool),
      contenders: [
        lockerContender(
          "shared-pool",
          `${name}, one pool for the 8 (releases heard)`,
          () => poolOf(8),
          (made) => new Locker(made),
          true,
        ),
      ],
      polling: [
        lockerContender(
          "own-pool",
          `${name}, a pool each (waiters poll)`,
          () => poolOf(2),
          (made) => new Locker(made),
          false,
        ),
      ],
      log,
    });
    return { store: await store(), config: CONFIG, ...rows };
  } finally {
    await pool.end();
    await server.stop();
  }
}

/** PostgresTableLocker against its floor. */
export async function runPostgresTable(context = {}) {
  const server = await PostgresServer.start();
  onCleanup(() => server.killSync());
  return serverTableRows({
    server,
    name: "PostgresTableLocker",
    Locker: PostgresTableLocker,
    poolOf: (max) => server.pool({ max }),
    floorOf: postgresTableFloor,
    store: async () => `PostgreSQL ${(await server.query("SHOW server_version"))[0]?.server_version}`,
    log: context.log ?? (() => undefined),
  });
}

/** MySqlTableLocker against its floor, on MariaDB. */
export async function runMySqlTable(context = {}) {
  const server = await MariaDbServer.start();
  onCleanup(() => server.killSync());
  return serverTableRows({
    server,
    name: "MySqlTableLocker",
    Locker: MySqlTableLocker,
    poolOf: (connectionLimit) => server.pool({ connectionLimit }),
    floorOf: mySqlTableFloor,
    store: async () => `MariaDB ${mariaDbVersion()}`,
    log: context.log ?? (() => undefined),
  });
}

/** SqliteLocker against its floor, on a file in a temp dir. */
export async function runSqlite(context = {}) {
  const log = context.log ?? (() => undefined);
  const directory = mkdtempSync(join(tmpdir(), "globallock-bench-sqlite-"));
  const removeDirectory = () => rmSync(directory, { recursive: true, force: true });
  onCleanup(removeDirectory);
  const path = join(directory, "locks.db");
  // As SqliteLocker opens a path: WAL, a 10 ms busy timeout. The locker and the floor share it.
  const db = new Database(path, { timeout: 10 });
  try {
    db.pragma("journal_mode = WAL");
    const locker = new SqliteLocker(db);
    await (await locker.lock(undefined, "tables"))();
    const rows = await tableRows({
      name: "SqliteLocker",
      locker,
      floor: sqliteFloor(db),
      on: "Database",
      contenders: [
        {
          id: "own-connection",
          label: "SqliteLocker, each opening the file (releases heard)",
          open() {
            const own = new SqliteLocker(path);
            return { lock: (key) => own.lock(undefined, key), close: () => own.close() };
          },
        },
      ],
      log,
    });
    const version = db.prepare("SELECT sqlite_version() AS version").get().version;
    return { store: `SQLite ${version}`, config: CONFIG, ...rows };
  } finally {
    db.close();
    removeDirectory();
  }
}

/** One table store's Markdown section, titled `title`. */
export function renderTable(results, title) {
  return renderStoreSection(title, results);
}
