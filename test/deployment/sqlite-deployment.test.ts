/**
 * checkDeployment on the SQLite lockers, against real database files in a temporary directory:
 * a file the locker opens itself (switched to WAL), a Database of the caller's in rollback-journal
 * mode with better-sqlite3's 5 s busy timeout, one in memory, a file that is not a database, a
 * directory that does not exist. (A network file system cannot be mounted here: its recognition by
 * `statfs` type is tested in deployment.test.ts.)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkDeployment,
  type Finding,
  SqliteLocker,
  SqliteReadWriteLocker,
  SqliteSemaphore,
} from "../../src/index.js";

const codes = (found: readonly Finding[]): string[] => found.map((item) => `${item.level}:${item.code}`).sort();

let directory: string;
const closables: Array<{ close(): unknown }> = [];
const keep = <T extends { close(): unknown }>(made: T): T => {
  closables.push(made);
  return made;
};

beforeAll(() => {
  directory = mkdtempSync(join(tmpdir(), "globallock-sqlite-doctor-"));
});
afterAll(async () => {
  // Lockers first, then the Databases they were given.
  for (const closable of closables) await closable.close();
  rmSync(directory, { recursive: true, force: true });
});

/** The journal mode the file at `path` has, read on a connection of its own. */
function journalMode(path: string): string {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return String(db.pragma("journal_mode", { simple: true }));
  } finally {
    db.close();
  }
}

describe("checkDeployment: SQLite", () => {
  it("a path on a local file system: nothing before the file exists, nothing once the locker made it (in WAL mode)", async () => {
    const path = join(directory, "fresh.db");
    const locker = keep(new SqliteLocker(path));
    expect(await checkDeployment(locker)).toEqual([]);
    const release = await locker.lock(undefined, "k");
    await release();
    expect(journalMode(path)).toBe("wal");
    expect(await checkDeployment(locker)).toEqual([]);
  });

  it("a file in rollback-journal mode given by path: nothing to say, since the locker switches it to WAL when it opens it", async () => {
    const path = join(directory, "rollback.db");
    new Database(path).close();
    expect(journalMode(path)).toBe("delete");
    const semaphore = keep(new SqliteSemaphore(path, { limit: 2 }));
    expect(await checkDeployment(semaphore)).toEqual([]);
    await (await semaphore.acquire(undefined, "k")).release();
    expect(journalMode(path)).toBe("wal");
    expect(await checkDeployment(semaphore)).toEqual([]);
  });

  it("a Database of the caller's in rollback-journal mode with the default busy timeout: a warning and an info, each with its fix; in WAL with a short timeout, nothing", async () => {
    const path = join(directory, "given.db");
    const db = keep(new Database(path));
    const rw = keep(new SqliteReadWriteLocker(db));
    const found = await checkDeployment(rw.read);
    expect(codes(found)).toEqual(["info:sqlite-busy-timeout", "warning:sqlite-not-wal"]);
    expect(found.find((item) => item.code === "sqlite-not-wal")?.fix).toMatch(/journal_mode = WAL/);
    expect(found.find((item) => item.code === "sqlite-busy-timeout")?.message).toMatch(/5000 ms/);
    db.pragma("journal_mode = WAL");
    db.pragma("busy_timeout = 10");
    expect(await checkDeployment(rw.write)).toEqual([]);
  });

  it("a Database in memory is a warning: its locks are one connection's", async () => {
    const db = keep(new Database(":memory:"));
    expect(codes(await checkDeployment(keep(new SqliteLocker(db))))).toEqual(["warning:sqlite-in-memory"]);
  });

  it("a file that is not a database, and a directory that does not exist, are errors naming the path", async () => {
    const notDatabase = join(directory, "notes.txt");
    writeFileSync(notDatabase, "not a database, but long enough to have a header of a hundred bytes ".repeat(4));
    const found = await checkDeployment(keep(new SqliteLocker(notDatabase)));
    expect(codes(found)).toEqual(["error:sqlite-unusable"]);
    expect(found[0]?.message).toContain(notDatabase);
    const nowhere = join(directory, "missing", "locks.db");
    const missing = await checkDeployment(keep(new SqliteLocker(nowhere)));
    expect(codes(missing)).toEqual(["error:sqlite-unusable"]);
    expect(missing[0]?.message).toContain(nowhere);
  });
});
