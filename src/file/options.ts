import { tmpdir, userInfo } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { MIN_EXPIRY_MS } from "../core/limits.js";
import { InvalidArgumentError, type LockLostError } from "../errors.js";
import { snapshotOptions, validateFunction, validateTimerDelay } from "../internal/validate.js";

/**
 * Options of {@link FileLocker}. Every one is optional; `undefined` means the default, `null` and
 * unknown names are rejected.
 */
export interface FileLockerOptions {
  /**
   * The directory that holds the lock files (default: {@link defaultLockDirectory}, a per-user
   * folder under the OS temporary directory, created with mode 0700). Lockers exclude each other
   * when they use the same directory, whatever process they live in. A directory that does not
   * exist is created (mode 0700).
   */
  directory?: string | undefined;
  /**
   * Lease length in milliseconds (default `30_000`, at least `200`). A held lock is extended every
   * `expiry / 2`; the lock of a holder that stopped (SIGSTOP, a blocked event loop) can be taken
   * over once its lease ran out, so after at most this long. A holder of this host that died is
   * taken over at once (on Linux; see {@link FileLocker}), a waiter finding out within `backoff.max`.
   */
  expiry?: number | undefined;
  /**
   * Safety-net wait of a blocked `lock` between attempts when no release is seen, in ms: jittered
   * exponential from `min` to `max` (default `{ min: 50, max: 1000 }`; `max` capped at
   * `expiry / 2`), and never later than the holder's deadline read from its lock file. Catches
   * dead holders (found dead at the next look) and missed file-system notifications.
   */
  backoff?:
    | {
        /** The first wait, in ms (default 50). */
        min?: number | undefined;
        /** The longest wait, in ms (default 1000, at most `expiry / 2`). */
        max?: number | undefined;
      }
    | undefined;
  /**
   * Called (synchronously, errors swallowed) when a held lock is found lost: an extension found
   * its lock file gone or owned by another holder, or its lease ran out without a successful
   * extension. The holder is not cancelled; this is how it can find out.
   */
  onLockLost?: ((error: LockLostError) => void) | undefined;
}

/** {@link FileLockerOptions} with every default filled in and validated. */
export interface ResolvedFileLockerOptions {
  /** Absolute path of the lock directory. */
  readonly directory: string;
  /** Whether `directory` is the default one (then its owner and mode are checked before use). */
  readonly defaultDirectory: boolean;
  readonly expiry: number;
  readonly backoffMin: number;
  readonly backoffMax: number;
  /**
   * The bound the lease keeper plans one extension with, in ms: a local rename takes
   * microseconds, but waits for one of the store's few slots and for libuv's thread pool, which
   * a burst of attempts (or any file-system work of the process) may keep busy for a while.
   */
  readonly operationTimeout: number;
  /** Extension batches in flight at most (each runs through the store's slots). */
  readonly sweepConcurrency: number;
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
}

/** See {@link ResolvedFileLockerOptions.operationTimeout}. */
const FILE_OPERATION_TIMEOUT_MS = 1000;

const OPTION_NAMES = ["directory", "expiry", "backoff", "onLockLost"] as const satisfies ReadonlyArray<
  keyof FileLockerOptions
>;

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
  const expiry = given.expiry === undefined ? 30_000 : given.expiry;
  validateTimerDelay("options.expiry", expiry, MIN_EXPIRY_MS);
  const backoff = snapshotOptions("options.backoff", given.backoff, ["min", "max"]);
  const backoffMin = backoff.min === undefined ? 50 : backoff.min;
  validateTimerDelay("options.backoff.min", backoffMin);
  const backoffMax = backoff.max === undefined ? Math.max(1000, backoffMin) : backoff.max;
  validateTimerDelay("options.backoff.max", backoffMax, backoffMin);
  const onLockLost = given.onLockLost;
  if (onLockLost !== undefined) validateFunction("options.onLockLost", onLockLost);
  return {
    directory: directory === undefined ? defaultLockDirectory() : absolute(directory),
    defaultDirectory: directory === undefined,
    expiry,
    backoffMin,
    backoffMax: Math.max(backoffMin, Math.min(backoffMax, Math.floor(expiry / 2))),
    operationTimeout: FILE_OPERATION_TIMEOUT_MS,
    sweepConcurrency: 2,
    onLockLost: onLockLost as ((error: LockLostError) => void) | undefined,
  };
}

function absolute(path: string): string {
  return isAbsolute(path) ? path : resolve(path);
}
