import { access, statfs } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { SqliteDatabase } from "../table/sqlite-dialect.js";
import { networkFileSystem, onNetworkFileSystem } from "./files.js";
import { type Finding, finding } from "./finding.js";

/** A busy timeout above this (ms) is said: each statement may block the event loop that long. */
const LONG_BUSY_TIMEOUT_MS = 100;

/** How the check opens a locker's database file that the locker has not opened: read-only, never creating it. */
type OpenReadOnly = new (path: string, options: { readonly: true; fileMustExist: true }) => SqliteDatabase;

/**
 * The findings of an SQLite locker's database (`source`, as given to the locker; `connection`,
 * the database it runs its statements on now, if open): a file on a network file system
 * (SQLite's locks and WAL's shared memory hold only between the processes of one host), a
 * journal mode other than WAL (readers and writers of the lease table then block each other), a
 * database in memory (one connection's only), a file that cannot be read, and a `Database` of the
 * caller's whose busy timeout blocks the event loop for long. Reads only: a file the locker has
 * not opened yet is opened read-only or, missing, not created (the locker switches it to WAL, or
 * creates it in WAL mode, when it opens it).
 */
export async function checkSqlite(
  source: SqliteDatabase | string,
  connection: () => SqliteDatabase | undefined,
): Promise<Finding[]> {
  const given = typeof source === "string" ? undefined : source;
  if (given !== undefined && (given.memory || given.name === "" || given.name === ":memory:")) {
    return [
      finding(
        "warning",
        "sqlite-in-memory",
        "The database is in memory: its locks are this connection's only, no other process sees them",
        "Give the locker a database file (its path, or a Database opened on one)",
      ),
    ];
  }
  const path = resolve(given?.name ?? (source as string));
  const found: Finding[] = [];
  try {
    const network = networkFileSystem((await statfs(dirname(path))).type);
    if (network !== undefined) {
      found.push(
        onNetworkFileSystem(network, {
          code: "sqlite-network-filesystem",
          files: `The database file ${path}`,
          oneHost: "SQLite's locks and WAL's shared memory hold only between the processes of one host",
          fuseMayNotKeep: "its locks",
          fix: "Keep the database file on a local file system (ext4, xfs, tmpfs…); across hosts, use PostgresTableLocker or MySqlTableLocker",
        }),
      );
    }
    const open = connection();
    if (open === undefined) {
      await readable(path);
      return found;
    }
    const journal = String(open.pragma("journal_mode", { simple: true })).toLowerCase();
    if (journal !== "wal") found.push(notWal(path, journal, given !== undefined));
    const busyTimeout = given === undefined ? 0 : Number(given.pragma("busy_timeout", { simple: true }));
    if (busyTimeout > LONG_BUSY_TIMEOUT_MS) {
      found.push(
        finding(
          "info",
          "sqlite-busy-timeout",
          `The Database's busy timeout is ${busyTimeout} ms: while another process writes, a locker's statement blocks this process's event loop for up to that long`,
          "Open it with new Database(path, { timeout: 10 }): the locker waits for a busy database without blocking",
        ),
      );
    }
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    found.push(finding("error", "sqlite-unusable", `The database ${path} cannot be used: ${detail}`));
  }
  return found;
}

/**
 * Throws unless the file at `path` is a database SQLite can read (opened read-only, one pragma);
 * a missing file is fine (the locker creates it).
 */
async function readable(path: string): Promise<void> {
  try {
    await access(path);
  } catch (error) {
    if ((error as { code?: unknown }).code === "ENOENT") return;
    throw error;
  }
  // An optional peer dependency, loaded only for a locker given a path (as the locker loads it).
  const Database = (await import("better-sqlite3")).default as unknown as OpenReadOnly;
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma("journal_mode", { simple: true });
  } finally {
    db.close();
  }
}

/** The finding of a database in a journal mode other than WAL (`given`: a Database of the caller's). */
function notWal(path: string, mode: string, given: boolean): Finding {
  return finding(
    "warning",
    "sqlite-not-wal",
    `The database ${path} is in ${mode} journal mode, not WAL: readers and writers of the lease table block each other, so attempts wait (and time out) on other processes' reads${given ? "" : " (the locker asked for WAL when it opened the file: it was refused, or switched back since)"}`,
    given
      ? "Switch the file to WAL once: db.pragma('journal_mode = WAL') (it stays in the file)"
      : "Keep the database file on a local file system, where SQLite can use WAL, and let nothing switch it back",
  );
}
