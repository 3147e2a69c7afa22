/**
 * Table lockers on real databases for the contract suites: PostgreSQL through a real PgBouncer in
 * transaction mode, MariaDB, and an SQLite file in a temp directory. One fixture per test file;
 * every locker it makes is closed by `stop`, which also stops the servers and removes the files.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Pool as MySqlPool } from "mysql2/promise";
import type { Pool as PgPool } from "pg";
import type { Locker, ReadWriteLocker } from "../../src/index.js";
import {
  MySqlTableLocker,
  MySqlTableReadWriteLocker,
  MySqlTableSemaphore,
} from "../../src/table/mysql-table-locker.js";
import type { TableLockerOptions } from "../../src/table/options.js";
import {
  PostgresTableLocker,
  PostgresTableReadWriteLocker,
  PostgresTableSemaphore,
} from "../../src/table/postgres-table-locker.js";
import { SqliteLocker, SqliteReadWriteLocker, SqliteSemaphore } from "../../src/table/sqlite-locker.js";
import { MariaDbServer } from "../../support/mariadb-server.mjs";
import { PgBouncerServer } from "../../support/pgbouncer-server.mjs";
import { PostgresServer } from "../../support/postgres-server.mjs";
import type { LockerHarness } from "../contracts/contract.js";
import type { ReadWriteHarness } from "../contracts/read-write-contract.js";
import type { SemaphoreHarness } from "../contracts/semaphore-contract.js";

/** The suites' lease: short, so that expiries are seen quickly, yet roomy on a loaded machine. */
export const TABLE_EXPIRY = 4000;

/** A wake-only locker polls so slowly that only a release heard in this process wakes it in time. */
const WAKE_ONLY: TableLockerOptions = { backoff: { min: 20_000, max: 20_000 }, expiry: 60_000 };

export type Dialect = "postgres" | "mysql" | "sqlite";

/** How to reach one database from another process (see table-child.mjs). */
export type TableTarget =
  | {
      readonly dialect: "postgres";
      readonly connection: { host: string; port: number; user: string; database: string };
    }
  | { readonly dialect: "mysql"; readonly connection: { host: string; port: number; user: string; database: string } }
  | { readonly dialect: "sqlite"; readonly path: string };

/** One database, its pool (or file), and the lockers made on it. */
export class TableFixture {
  readonly dialect: Dialect;
  readonly closables: Array<{ close(): Promise<void> }> = [];
  readonly #stop: () => Promise<void>;
  /** The pool every locker of the fixture shares (PostgreSQL, MySQL), or the database file (SQLite). */
  readonly store: PgPool | MySqlPool | string;
  /** How another process reaches the same database. */
  readonly target: TableTarget;

  private constructor(
    dialect: Dialect,
    store: PgPool | MySqlPool | string,
    target: TableTarget,
    stop: () => Promise<void>,
  ) {
    this.dialect = dialect;
    this.store = store;
    this.target = target;
    this.#stop = stop;
  }

  /** PostgreSQL behind a PgBouncer in transaction mode. */
  static async postgres(): Promise<TableFixture> {
    const server = await PostgresServer.start();
    let pooler: PgBouncerServer;
    try {
      pooler = await PgBouncerServer.start(server, { poolMode: "transaction", poolSize: 4 });
    } catch (error) {
      await server.stop();
      throw error;
    }
    const pool = pooler.pool({ max: 8 });
    return new TableFixture("postgres", pool, { dialect: "postgres", connection: pooler.connection }, async () => {
      await pooler.stop();
      await server.stop();
      await pool.end().catch(() => undefined);
    });
  }

  /** A fresh MariaDB server. */
  static async mysql(): Promise<TableFixture> {
    const server = await MariaDbServer.start();
    const pool = server.pool({ connectionLimit: 8 });
    return new TableFixture("mysql", pool, { dialect: "mysql", connection: server.connection }, async () => {
      await server.stop();
      await pool.end().catch(() => undefined);
    });
  }

  /** An SQLite file in a fresh temp directory; every locker opens it itself (as another process would). */
  static async sqlite(): Promise<TableFixture> {
    const directory = mkdtempSync(join(tmpdir(), "globallock-sqlite-"));
    const path = join(directory, "locks.db");
    return new TableFixture("sqlite", path, { dialect: "sqlite", path }, async () => {
      rmSync(directory, { recursive: true, force: true });
    });
  }

  /** Starts the fixture of `dialect`. */
  static start(dialect: Dialect): Promise<TableFixture> {
    return dialect === "postgres"
      ? TableFixture.postgres()
      : dialect === "mysql"
        ? TableFixture.mysql()
        : TableFixture.sqlite();
  }

  #keep<T extends { close(): Promise<void> }>(made: T): T {
    this.closables.push(made);
    return made;
  }

  /** A new locker on the fixture's database. */
  locker(options?: TableLockerOptions): Locker {
    const given = { expiry: TABLE_EXPIRY, ...options };
    const store = this.store;
    if (this.dialect === "postgres") return this.#keep(new PostgresTableLocker(store as PgPool, given));
    if (this.dialect === "mysql") return this.#keep(new MySqlTableLocker(store as MySqlPool, given));
    return this.#keep(new SqliteLocker(store as string, given));
  }

  /** A new semaphore with `limit` on the fixture's database. */
  semaphore(limit: number, options?: TableLockerOptions): Locker {
    const given = { expiry: TABLE_EXPIRY, ...options, limit };
    const store = this.store;
    if (this.dialect === "postgres") return this.#keep(new PostgresTableSemaphore(store as PgPool, given));
    if (this.dialect === "mysql") return this.#keep(new MySqlTableSemaphore(store as MySqlPool, given));
    return this.#keep(new SqliteSemaphore(store as string, given));
  }

  /** A new read-write locker on the fixture's database. */
  readWrite(options?: TableLockerOptions): ReadWriteLocker {
    const given = { expiry: TABLE_EXPIRY, ...options };
    const store = this.store;
    if (this.dialect === "postgres") return this.#keep(new PostgresTableReadWriteLocker(store as PgPool, given));
    if (this.dialect === "mysql") return this.#keep(new MySqlTableReadWriteLocker(store as MySqlPool, given));
    return this.#keep(new SqliteReadWriteLocker(store as string, given));
  }

  /**
   * Runs one statement on the database directly (`?` placeholders on every dialect) and returns
   * its rows (none for a statement that returns none).
   */
  async query(sql: string, values: unknown[] = []): Promise<Array<Record<string, unknown>>> {
    if (this.dialect === "postgres") {
      let index = 0;
      const text = sql.replace(/\?/g, () => `$${++index}`);
      return (await (this.store as PgPool).query(text, values)).rows;
    }
    if (this.dialect === "mysql") {
      const [rows] = await (this.store as MySqlPool).query(sql, values);
      return Array.isArray(rows) ? (rows as Array<Record<string, unknown>>) : [];
    }
    const db = new Database(this.store as string, { timeout: 5000 });
    try {
      const statement = db.prepare(sql);
      if (statement.reader) return statement.all(...values) as Array<Record<string, unknown>>;
      statement.run(...values);
      return [];
    } finally {
      db.close();
    }
  }

  /** Closes every locker made here, then stops the database. */
  async stop(): Promise<void> {
    await Promise.allSettled(this.closables.map((closable) => closable.close()));
    await this.#stop();
  }

  /** The lock contract harness (its cleanup leaves the database up: stop the fixture in `afterAll`). */
  harness(): LockerHarness {
    return {
      create: async (options) => this.locker(options?.wakeOnly ? WAKE_ONLY : undefined),
      peer: async (_locker, options) => this.locker(options?.wakeOnly ? WAKE_ONLY : undefined),
      fencing: true,
      handOff: true,
      cleanup: async () => undefined,
    };
  }

  /** The semaphore contract harness. */
  semaphoreHarness(): SemaphoreHarness {
    const limits = new WeakMap<Locker, number>();
    const make = (limit: number, wakeOnly: boolean | undefined): Locker => {
      const semaphore = this.semaphore(limit, wakeOnly ? WAKE_ONLY : undefined);
      limits.set(semaphore, limit);
      return semaphore;
    };
    return {
      create: async ({ limit, wakeOnly }) => make(limit, wakeOnly),
      peer: async (locker, options) => make(limits.get(locker) ?? 1, options?.wakeOnly),
      expires: true,
      cleanup: async () => undefined,
    };
  }

  /** The read-write contract harness. */
  readWriteHarness(): ReadWriteHarness {
    return {
      create: async (options) => this.readWrite(options?.wakeOnly ? WAKE_ONLY : undefined),
      peer: async (_rw, options) => this.readWrite(options?.wakeOnly ? WAKE_ONLY : undefined),
      fencing: true,
      cleanup: async () => undefined,
    };
  }
}

/**
 * The fixture of a test file, started by the first suite that asks for it and stopped by
 * `stopShared` (call it in the file's `afterAll`).
 */
export function sharedFixture(dialect: Dialect): { get(): Promise<TableFixture>; stop(): Promise<void> } {
  let started: Promise<TableFixture> | undefined;
  return {
    get: () => {
      started ??= TableFixture.start(dialect);
      return started;
    },
    stop: async () => {
      await (await started?.catch(() => undefined))?.stop();
    },
  };
}
