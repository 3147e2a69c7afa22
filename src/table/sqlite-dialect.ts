import { resolve } from "node:path";
import { type Cancel, cancelledError, type TableDialect } from "./dialect.js";
import type { Answers, Plan, Step } from "./plans.js";
import { keyRows } from "./postgres-dialect.js";

/** What running a statement that returns no rows tells (`better-sqlite3`'s `RunResult`). */
export interface SqliteRunResult {
  /** Rows the statement inserted, updated or deleted. */
  changes: number;
  /** The rowid of the latest row inserted. */
  lastInsertRowid: number | bigint;
}

/** A prepared statement of `better-sqlite3` (the parts the SQLite locker uses). */
export interface SqliteStatement {
  /** Runs a statement that returns no rows. */
  run(...params: unknown[]): SqliteRunResult;
  /** Runs it and returns its first row (`undefined` when none). */
  get(...params: unknown[]): unknown;
  /** Runs it and returns every row. */
  all(...params: unknown[]): unknown[];
  /** Integers as `bigint` (so that no id loses precision). */
  safeIntegers(toggleState?: boolean): unknown;
}

/**
 * An open `better-sqlite3` database (`new Database(path)`) that the caller creates, owns and
 * closes: the parts the SQLite locker uses, written out so that the package's declarations import
 * nothing from `better-sqlite3`.
 */
export interface SqliteDatabase {
  /** The file it opened (`""` or `":memory:"` for a database of this connection only). */
  readonly name: string;
  /** True for a database in memory. */
  readonly memory: boolean;
  /** True while a transaction is open on this connection. */
  readonly inTransaction: boolean;
  /** Prepares a statement. */
  prepare(source: string): SqliteStatement;
  /** Runs statements that take no parameters. */
  exec(source: string): unknown;
  /** Runs a `PRAGMA`. */
  pragma(source: string, options?: { simple?: boolean }): unknown;
  /** Closes the connection. */
  close(): unknown;
}

/** The clock in ms, read once per statement (SQLite's `'now'` is fixed for one statement). */
const NOW = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/**
 * How long (ms) a statement of a database the locker opened waits, blocking this thread, for
 * another process's write before it answers busy; the locker then waits without blocking (a
 * jittered 1 to 32 ms) and tries again, until the operation timeout.
 */
const BUSY_TIMEOUT_MS = 10;

/** Loads `better-sqlite3` (an optional peer dependency) once, when a locker opens a file. */
let loading: Promise<new (path: string) => SqliteDatabase> | undefined;

/**
 * SQLite through `better-sqlite3`: one database file, many processes. An attempt is one
 * `BEGIN IMMEDIATE` transaction (SQLite takes the database's write lock, so attempts are one at a
 * time and no key lock row is needed), run synchronously: nothing else of this process runs inside
 * it. A database busy with another process's write is tried again without blocking the event loop
 * (see {@link BUSY_TIMEOUT_MS}); each statement blocks it for its own few microseconds.
 */
export class SqliteDialect implements TableDialect {
  readonly kind = "sqlite";
  readonly database: unknown;
  readonly #given: SqliteDatabase | undefined;
  readonly #path: string | undefined;
  /** The database this locker opened from `path` (until it closes). */
  #opened: SqliteDatabase | undefined;
  #closed = false;
  readonly #statements = new Map<string, SqliteStatement>();
  readonly #sql: Readonly<Record<Exclude<Step["op"], "lock">, string>>;

  constructor(source: SqliteDatabase | string, table: string) {
    if (typeof source === "string") {
      this.#path = source;
      this.database = resolve(source);
    } else {
      this.#given = source;
      this.database = source.memory || source.name === "" ? source : resolve(source.name);
    }
    const leases = `"${table}"`;
    const tokens = "(SELECT value FROM json_each(?))";
    this.#sql = {
      create:
        `CREATE TABLE IF NOT EXISTS ${leases} (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, ` +
        "token TEXT NOT NULL UNIQUE, owner TEXT NOT NULL, weight INTEGER NOT NULL, expires_at INTEGER NOT NULL); " +
        `CREATE INDEX IF NOT EXISTS "${table}_name" ON ${leases} (name, id);`,
      rows:
        `SELECT n.now, l.id, l.token, l.owner, l.weight, l.expires_at FROM (SELECT ${NOW} AS now) n ` +
        `LEFT JOIN ${leases} l ON l.name = ? ORDER BY l.id`,
      insert: `INSERT INTO ${leases} (name, token, owner, weight, expires_at) VALUES (?, ?, ?, ?, ${NOW} + ?)`,
      renew: `UPDATE ${leases} SET expires_at = ${NOW} + ? WHERE token IN ${tokens} AND expires_at > ${NOW} RETURNING token`,
      purge: `DELETE FROM ${leases} WHERE token IN ${tokens} AND expires_at <= ${NOW}`,
      remove: `DELETE FROM ${leases} WHERE token = ? RETURNING expires_at > ${NOW} AS live`,
      held: `SELECT 1 FROM ${leases} WHERE name = ? AND expires_at > ${NOW} LIMIT 1`,
      swap: `UPDATE ${leases} SET token = ?, owner = ?, expires_at = ${NOW} + ? WHERE token = ? AND expires_at > ${NOW}`,
      names:
        `SELECT DISTINCT name FROM ${leases} WHERE substr(name, 1, length(?)) = ? AND expires_at > ${NOW} ` +
        "ORDER BY name LIMIT ?",
    };
  }

  async run<T>(plan: () => Plan<T>, transactional: boolean, cancel: Cancel): Promise<T> {
    for (let pause = 1; ; pause = Math.min(2 * pause, 32)) {
      if (cancel.cancelled) throw cancelledError();
      const own = this.#given ?? this.#opened;
      let db: SqliteDatabase | undefined;
      try {
        // After close, a release still works: on a connection of its own.
        db = own ?? (await this.#open(this.#closed));
        // Someone's transaction is open on this connection (the caller's, across an await): wait.
        if (!db.inTransaction) return this.#runNow(db, plan, transactional, db === own);
      } catch (error) {
        if (!isBusy(error)) throw error;
      } finally {
        if (db !== undefined && db !== own && db !== this.#opened) db.close();
      }
      await new Promise((done) => setTimeout(done, pause * (0.5 + Math.random() / 2)).unref());
    }
  }

  /** The database the locker runs its statements on now: the caller's, or the file it opened (until it closes). */
  get connection(): SqliteDatabase | undefined {
    return this.#given ?? this.#opened;
  }

  close(): void {
    this.#closed = true;
    this.#opened?.close();
    this.#opened = undefined;
    this.#statements.clear();
  }

  /** Opens the locker's file (kept as its database unless `temporary`). */
  async #open(temporary: boolean): Promise<SqliteDatabase> {
    loading ??= import("better-sqlite3").then(
      (loaded) => loaded.default as unknown as new (path: string) => SqliteDatabase,
      (error: unknown) => {
        loading = undefined;
        throw error;
      },
    );
    const Database = await loading;
    const db = new Database(this.#path as string);
    try {
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.pragma("journal_mode = WAL");
    } catch (error) {
      db.close();
      throw error;
    }
    if (!temporary && !this.#closed && this.#opened === undefined) this.#opened = db;
    return db;
  }

  /** Runs `plan` at once: its transaction begins and ends within this call. */
  #runNow<T>(db: SqliteDatabase, plan: () => Plan<T>, transactional: boolean, cached: boolean): T {
    const prepare = (sql: string): SqliteStatement => {
      if (!cached) return db.prepare(sql);
      let statement = this.#statements.get(sql);
      if (statement === undefined) {
        statement = db.prepare(sql);
        this.#statements.set(sql, statement);
      }
      return statement;
    };
    if (transactional) prepare("BEGIN IMMEDIATE").run();
    try {
      const steps = plan();
      let next = steps.next();
      while (!next.done) next = steps.next(this.#step(db, prepare, next.value));
      if (transactional) prepare("COMMIT").run();
      return next.value;
    } catch (error) {
      if (transactional && db.inTransaction) prepare("ROLLBACK").run();
      throw error;
    }
  }

  #step(db: SqliteDatabase, prepare: (sql: string) => SqliteStatement, step: Step): Answers[Step["op"]] {
    if (step.op === "lock") return undefined;
    if (step.op === "create") {
      db.exec(this.#sql.create);
      return undefined;
    }
    const statement = prepare(this.#sql[step.op]);
    switch (step.op) {
      case "rows":
        statement.safeIntegers(true);
        return keyRows(statement.all(step.name) as Array<Record<string, unknown>>);
      case "insert":
        return BigInt(statement.run(step.name, step.token, step.owner, step.weight, step.ttl).lastInsertRowid);
      case "renew": {
        const rows = statement.all(step.ttl, JSON.stringify(step.tokens)) as Array<{ token: string }>;
        return new Set(rows.map((row) => row.token));
      }
      case "purge":
        return statement.run(JSON.stringify(step.tokens)).changes;
      case "remove": {
        const row = statement.get(step.token) as { live: number | bigint } | undefined;
        return row === undefined ? "absent" : Number(row.live) === 1 ? "live" : "expired";
      }
      case "held":
        return statement.get(step.name) !== undefined;
      case "swap":
        return statement.run(step.fresh, step.owner, step.ttl, step.token).changes > 0;
      case "names": {
        const rows = statement.all(step.prefix, step.prefix, step.limit) as Array<{ name: string }>;
        return rows.map((row) => row.name);
      }
    }
  }
}

/** Another connection holds the lock this statement needs (`SQLITE_BUSY`, `SQLITE_LOCKED` and their kinds). */
function isBusy(error: unknown): boolean {
  const { code } = error as { code?: unknown };
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"));
}
