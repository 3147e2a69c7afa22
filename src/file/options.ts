import { tmpdir, userInfo } from "node:os";
import { join, resolve } from "node:path";
import { InvalidArgumentError } from "../errors.js";
import { snapshotOptions } from "../internal/validate.js";
import type { LockerOptions, ResolvedLockerOptions } from "../locker-options.js";
import { resolveBackoff, resolveExpiry, resolveOnLockLost, resolveOwner } from "../locker-options.js";

/**
 * Options of {@link FileLocker}. Every one is optional; `undefined` means the default, `null` and
 * unknown names are rejected.
 */
export interface FileLockerOptions extends LockerOptions {
  /**
   * The directory that holds the lock files (default: {@link defaultLockDirectory}, a per-user
   * folder under the OS temporary directory, created with mode 0700). Lockers exclude each other
   * when they use the same directory, whatever process they live in. A directory that does not
   * exist is created (mode 0700).
   */
  directory?: string | undefined;
  /**
   * Where the file-system calls that take, release and extend a lock (a `mkdir` and a `rename` or
   * two in the lock directory) run: on the event loop, synchronously (`true`), or through libuv's
   * thread pool (`false`). A trip through the thread pool (a worker thread woken, the event loop
   * woken back) costs more than such a call itself, but the event loop waits while a synchronous
   * call runs: microseconds on tmpfs, now and then milliseconds on a disk (a `rename` of a directory
   * waits for the file system's journal), longer on a busy one.
   *
   * `"auto"` (the default) calls synchronously only on a file system in memory (Linux: tmpfs,
   * ramfs; `/dev/shm`, and `/tmp` where it is mounted so), where a call never waits for a device;
   * on a disk (on an idle ext4 disk about one call in 4,000 waited 1–8 ms for the journal), on a
   * network file system and off Linux it uses the thread pool. `true` always calls synchronously,
   * `false` never. Whatever the mode, a locker calls synchronously only while none of its
   * operations waits for a slot (a burst of attempts goes through the thread pool), and fencing
   * counters, sweeps, the read-write locker's readers and queue and a semaphore's permits and queue
   * always go through the thread pool.
   */
  syncCalls?: boolean | "auto" | undefined;
}

/**
 * {@link FileLockerOptions} with every default filled in and validated. Its `operationTimeout` is
 * the bound the lease keeper plans one extension with: a local rename takes microseconds, but
 * waits for one of the store's few slots and for libuv's thread pool, which a burst of attempts
 * (or any file-system work of the process) may keep busy for a while. Its `sweepConcurrency`
 * counts extension batches (each runs through the store's slots).
 */
export interface ResolvedFileLockerOptions extends ResolvedLockerOptions {
  /** Absolute path of the lock directory. */
  readonly directory: string;
  /** Whether `directory` is the default one (then its owner and mode are checked before use). */
  readonly defaultDirectory: boolean;
  /** See {@link FileLockerOptions.syncCalls} (default `"auto"`). */
  readonly syncCalls: boolean | "auto";
}

/** See {@link ResolvedFileLockerOptions}: the bound of one extension, in ms. */
const FILE_OPERATION_TIMEOUT_MS = 1000;

const OPTION_NAMES = [
  "directory",
  "expiry",
  "backoff",
  "onLockLost",
  "owner",
  "syncCalls",
] as const satisfies ReadonlyArray<keyof FileLockerOptions>;

/**
 * The default lock directory: `globallock-<uid>` (on Windows `globallock-<user name>`) in
 * `os.tmpdir()`. Every process of one user computes the same path — a cron job as well as a login
 * shell (the XDG runtime directory is not used: cron jobs and services usually have none, and it
 * differs between login sessions). Processes of different users, or with different `TMPDIR`s, do
 * not share it: give them one `directory`.
 */
export function defaultLockDirectory(): string {
  const uid = typeof process.getuid === "function" ? String(process.getuid()) : safeUserName();
  return join(tmpdir(), `globallock-${uid}`);
}

function safeUserName(): string {
  try {
    return userInfo().username.replace(/[^A-Za-z0-9_.-]/g, "_");
  } catch {
    return "user";
  }
}

/**
 * Validates `options` and fills in the defaults. Each option (and each of `backoff`'s) is read
 * exactly once; unknown names and `null` values are rejected. Throws {@link InvalidArgumentError}.
 */
export function resolveFileOptions(options: FileLockerOptions | undefined): ResolvedFileLockerOptions {
  const given = snapshotOptions("options", options, OPTION_NAMES);
  const directory = given.directory;
  if (directory !== undefined && (typeof directory !== "string" || directory === "" || directory.includes("\0"))) {
    throw new InvalidArgumentError("options.directory", "a non-empty path without NUL characters", directory);
  }
  const expiry = resolveExpiry(given.expiry);
  const [backoffMin, backoffMax] = resolveBackoff(given.backoff, expiry);
  const onLockLost = resolveOnLockLost(given.onLockLost);
  const owner = resolveOwner(given.owner);
  const syncCalls = given.syncCalls ?? "auto";
  if (typeof syncCalls !== "boolean" && syncCalls !== "auto") {
    throw new InvalidArgumentError("options.syncCalls", 'true, false or "auto"', syncCalls);
  }
  return {
    directory: directory === undefined ? defaultLockDirectory() : absolute(directory),
    defaultDirectory: directory === undefined,
    syncCalls,
    expiry,
    backoffMin,
    backoffMax,
    operationTimeout: FILE_OPERATION_TIMEOUT_MS,
    sweepConcurrency: 2,
    onLockLost,
    owner,
  };
}

/** `path` absolute and normalized (no `..`, `.`, doubled or trailing separator), as `path.join` would leave it. */
function absolute(path: string): string {
  return resolve(path);
}
