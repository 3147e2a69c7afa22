/** The table lockers' arguments: refused with an InvalidArgumentError naming the value, before anything is sent. */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../../src/index.js";
import { MySqlTableLocker, MySqlTableSemaphore } from "../../src/table/mysql-table-locker.js";
import {
  PostgresTableLocker,
  PostgresTableReadWriteLocker,
  PostgresTableSemaphore,
} from "../../src/table/postgres-table-locker.js";
import type { SqliteDatabase } from "../../src/table/sqlite-dialect.js";
import { SqliteLocker, SqliteSemaphore } from "../../src/table/sqlite-locker.js";

/** A pool that must never be used. */
const unusedPool = {
  connect: () => Promise.reject(new Error("no statement is sent for bad arguments")),
  getConnection: () => Promise.reject(new Error("no statement is sent for bad arguments")),
};

/** The InvalidArgumentError `make` throws: its argument and the value it names. */
function refusal(make: () => unknown): { argument: string; received: unknown } {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    const { argument, received } = error as InvalidArgumentError;
    return { argument, received };
  }
  throw new Error("expected an InvalidArgumentError");
}

describe("table locker arguments", () => {
  it("a table that is not a plain identifier, named in the error", () => {
    for (const table of ["x-y", "1leases", "leases; DROP TABLE x", "", "a".repeat(49), 7, null]) {
      expect(refusal(() => new PostgresTableLocker(unusedPool, { table: table as string }))).toEqual({
        argument: "options.table",
        received: table,
      });
    }
    expect(() => new MySqlTableLocker(unusedPool, { table: "My_Leases_2" })).not.toThrow();
  });

  it("createTable that is not a boolean, a prefix longer than 1024 bytes, an unknown option", () => {
    expect(refusal(() => new SqliteLocker("/tmp/x.db", { createTable: "no" as never }))).toEqual({
      argument: "options.createTable",
      received: "no",
    });
    const prefix = "é".repeat(513);
    expect(refusal(() => new MySqlTableLocker(unusedPool, { prefix }))).toEqual({
      argument: "options.prefix",
      received: prefix,
    });
    expect(refusal(() => new PostgresTableReadWriteLocker(unusedPool, { tables: "x" } as never)).argument).toBe(
      "options.tables",
    );
  });

  it("a pool or database that is none, a database in memory by path, a semaphore's limit", () => {
    expect(refusal(() => new PostgresTableLocker({} as never))).toEqual({ argument: "pool", received: {} });
    expect(refusal(() => new MySqlTableSemaphore(null as never, { limit: 2 }))).toEqual({
      argument: "pool",
      received: null,
    });
    expect(refusal(() => new SqliteLocker(42 as never))).toEqual({ argument: "db", received: 42 });
    expect(refusal(() => new SqliteLocker(":memory:"))).toEqual({ argument: "db", received: ":memory:" });
    expect(refusal(() => new PostgresTableSemaphore(unusedPool, { limit: 0 }))).toEqual({
      argument: "options.limit",
      received: 0,
    });
  });

  it("takes a better-sqlite3 Database of the caller's, and leaves it open on close", async () => {
    const db: SqliteDatabase = new Database(":memory:");
    const semaphore = new SqliteSemaphore(db, { limit: 2 });
    const lease = await semaphore.acquire(undefined, "k", { weight: 2 });
    expect(await semaphore.tryAcquire(undefined, "k")).toBeUndefined();
    await lease.release();
    await semaphore.close();
    expect(db.prepare("SELECT count(*) AS n FROM globallock_leases").get()).toEqual({ n: 0 });
    db.close();
  });
});
