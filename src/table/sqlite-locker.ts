import { checkSqlite } from "../deployment/sqlite.js";
import { InvalidArgumentError } from "../errors.js";
import type { TableLockerOptions } from "./options.js";
import { type SqliteDatabase, SqliteDialect } from "./sqlite-dialect.js";
import { TableLocker, TableReadWriteLocker, TableSemaphore, type TableStoreSpec } from "./table-lockers.js";
import type { TableSemaphoreOptions } from "./table-parts.js";

/** A database or a path (checked first: an InvalidArgumentError naming what was passed) as a table store. */
const SQLITE: TableStoreSpec<SqliteDatabase | string, SqliteDialect> = {
  name: "sqlite",
  dialectOf(db) {
    const given = db as Partial<SqliteDatabase> | null | undefined;
    if (typeof db !== "string" && (typeof given?.prepare !== "function" || typeof given.exec !== "function")) {
      throw new InvalidArgumentError("db", "a better-sqlite3 Database or a file path", db);
    }
    if (db === "" || db === ":memory:") {
      throw new InvalidArgumentError("db", "a file path (a database in memory is one connection's only)", db);
    }
    return (table) => new SqliteDialect(db as SqliteDatabase | string, table);
  },
  check: (db, dialect) => checkSqlite(db, () => dialect.connection),
};

/**
 * A {@link Locker} on an SQLite lease table, shared by every process of this host that opens the
 * same database file (`better-sqlite3` 12). Given a path, the locker opens the file itself (WAL
 * mode, a 10 ms busy timeout) and closes it on `close()`; given a `Database`, it uses it as it is
 * (the caller owns and closes it; WAL is recommended, and a short `timeout`, see below).
 *
 * Rows, waiting, fencing, loss, hand-off and close work as on PostgreSQL (see
 * `PostgresTableLocker`). An attempt is one `BEGIN IMMEDIATE` transaction, run synchronously (so
 * nothing else of this process runs inside it). `better-sqlite3` calls block the event loop: each
 * statement for microseconds, plus up to the busy timeout while another process writes; past it,
 * the locker waits without blocking (1 to 32 ms, jittered) and tries again until the operation
 * timeout. A `Database` of yours opened with better-sqlite3's default `timeout` (5 s) may block
 * that long: open it with `{ timeout: 10 }`. The clock is this host's wall clock (`'now'` in SQL),
 * which every process on the host shares; a step of the clock moves every expiry with it.
 */
export class SqliteLocker extends TableLocker<SqliteDatabase | string, SqliteDialect> {
  /**
   * @param db a `better-sqlite3` Database (yours to close), or the path of the database file.
   * @param options see {@link TableLockerOptions}.
   */
  constructor(db: SqliteDatabase | string, options?: TableLockerOptions) {
    super(SQLITE, db, options);
  }
}

/**
 * A counting semaphore on an SQLite lease table (see {@link SqliteLocker} and
 * `PostgresTableSemaphore`): at most `limit` permits of a key at once, waiters served in arrival
 * order across processes. `fencing: true` is an UnsupportedError unless `limit` is 1.
 */
export class SqliteSemaphore extends TableSemaphore<SqliteDatabase | string, SqliteDialect> {
  /**
   * @param db a `better-sqlite3` Database (yours to close), or the path of the database file.
   * @param options the locker's options (default prefix `"globallock:semaphore:"`) and `limit`.
   */
  constructor(db: SqliteDatabase | string, options: TableSemaphoreOptions) {
    super(SQLITE, db, options);
  }
}

/**
 * Read-write locks on an SQLite lease table (see {@link SqliteLocker} and
 * `PostgresTableReadWriteLocker`): many readers or one writer per key, a waiting writer ahead of
 * the readers that came after it. Write leases can carry fencing tokens. Closing either view
 * closes both.
 */
export class SqliteReadWriteLocker extends TableReadWriteLocker<SqliteDatabase | string, SqliteDialect> {
  /**
   * @param db a `better-sqlite3` Database (yours to close), or the path of the database file.
   * @param options see {@link TableLockerOptions} (default prefix `"globallock:rw:"`).
   */
  constructor(db: SqliteDatabase | string, options?: TableLockerOptions) {
    super(SQLITE, db, options);
  }
}
