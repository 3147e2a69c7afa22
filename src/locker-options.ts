import { hostname } from "node:os";
import { DEFAULT_EXPIRY_MS } from "./core/limits.js";
import type { CoreSettings } from "./core/lock-core.js";
import { InvalidArgumentError, type LockLostError } from "./errors.js";
import {
  MAX_TIMER_DELAY_MS,
  type OptionsSnapshot,
  snapshotOptions,
  validateExpiry,
  validateFunction,
  validateTimerDelay,
} from "./internal/validate.js";

/*
 * The options every store's locker takes (Redis, PostgreSQL, file), declared and resolved once.
 * A store's options interface extends these and adds its own; its resolver calls the resolvers
 * below in the order its error messages promise.
 */

/**
 * Options every store's locker takes. Every one is optional; `undefined` means the default, `null`
 * and unknown names are rejected.
 */
export interface LockerOptions {
  /**
   * Lease length in milliseconds (default `30_000`, at least `200`; on PostgreSQL and the file
   * store at most 2147483647, the longest Node.js timer delay). A held lease is extended every
   * `expiry / 2` at the latest, and a lock whose holder died or stopped is freed after at most
   * about this long:
   *
   * - Redis: the key's TTL.
   * - PostgreSQL: while it holds leases the locker confirms its connection every `expiry / 2` at
   *   the latest (one `SELECT 1` per batch of leases), and asks PostgreSQL to end the session if
   *   it stays idle for `expiry` (`idle_session_timeout`, PostgreSQL 14 and later), so a frozen or
   *   cut-off holder's locks are freed after about this long.
   * - File: the lock of a holder that stopped (SIGSTOP, a blocked event loop) can be taken over
   *   once its lease ran out. A holder of this host that died is taken over at once (on Linux; see
   *   {@link FileLocker}), a waiter finding out within `backoff.max`.
   */
  expiry?: number | undefined;
  /**
   * Safety-net wait of a blocked `lock` between attempts when no release is seen, in ms: jittered
   * exponential from `min` to `max` (default `{ min: 50, max: 1000 }`, or `max = min` when only a
   * larger `min` is given; `max` capped at `expiry / 2`; both at most 2147483647). Catches the
   * expiry of a crashed holder's lock and lost notifications. The file store also never waits
   * past the holder's deadline read from its lock file, and finds a dead holder at its next look.
   */
  backoff?:
    | {
        /** The first (shortest) wait between attempts, in ms (default 50). */
        min?: number | undefined;
        /** The longest wait between attempts, in ms (default 1000, at most `expiry / 2`). */
        max?: number | undefined;
      }
    | undefined;
  /**
   * Called (synchronously, errors swallowed) when a held lock is found lost: an extension found
   * its key or lock file gone or held by another token, its PostgreSQL connection ended (the
   * server freed its session locks), or its lease ran out without a confirmed extension. The
   * holder is not cancelled; this is how it can find out.
   */
  onLockLost?: ((error: LockLostError) => void) | undefined;
  /**
   * Who this locker's holders are, as `inspect` and `globallock status` show them (default
   * `${os.hostname()}:${process.pid}`; a non-empty string of at most 256 bytes). Stored with each
   * lock at no cost on the uncontended path: in the value the store writes anyway.
   */
  owner?: string | undefined;
}

/** Options of a locker on a server (Redis, PostgreSQL), beside {@link LockerOptions}. */
export interface ServerLockerOptions extends LockerOptions {
  /**
   * Prepended to every key to form the store's name of it: the Redis key, or the string hashed to
   * a PostgreSQL lock id (default `"globallock:"`; may be empty).
   */
  prefix?: string | undefined;
  /**
   * Timeout of every command or statement the locker sends, in ms (default
   * `min(2000, expiry / 4)`; must be below `expiry / 2` and at most 2147483647, the longest Node.js
   * timer delay). A Redis node that does not answer in time counts as failed; a PostgreSQL
   * statement that does not answer in time ends the connection (its locks are reported lost and
   * the server frees them). The timeout measures the server's silence, not this process's
   * business: an answer already waiting in the socket always wins; time this process's event loop
   * spent stalled (a burst of calls, a long GC pause) does not count; and a single Redis node that
   * keeps answering this connection's earlier commands is busy, not down.
   */
  operationTimeout?: number | undefined;
}

/**
 * Options of a locker whose locks live on a connection of the caller's pool (PostgreSQL, MySQL),
 * beside {@link ServerLockerOptions}.
 */
export interface PooledLockerOptions extends ServerLockerOptions {
  /**
   * How long the locker waits for a connection from the pool, in ms (default `5000`). An exhausted
   * pool or an unreachable server then rejects with a `StoreUnavailableError`.
   */
  connectTimeout?: number | undefined;
}

/**
 * The options of {@link LockerOptions} and {@link ServerLockerOptions} with defaults filled in:
 * the core's settings (but for `minExpiry`, which only the in-process stores set).
 */
export interface ResolvedLockerOptions extends Omit<CoreSettings, "minExpiry" | "owner"> {
  /** Who the locker's holders are (see {@link LockerOptions.owner}). */
  readonly owner: string;
  /** The safety net's first (shortest) wait between attempts, in ms. */
  readonly backoffMin: number;
  /** The safety net's longest wait between attempts, in ms. */
  readonly backoffMax: number;
}

/**
 * A locker's `expiry`: by default {@link DEFAULT_EXPIRY_MS}; a lease length that is also a Node.js
 * timer delay (at most 2147483647 ms, about 24.8 days). Every locker accepts the same values: some
 * stores arm a timer of that length (a session's idle bound, its end after `close()`), and one
 * constructor call must not work on one store and fail on another.
 */
export function resolveExpiry(value: unknown): number {
  const expiry = value === undefined ? DEFAULT_EXPIRY_MS : value;
  validateExpiry("options.expiry", expiry);
  validateTimerDelay("options.expiry", expiry);
  return expiry;
}

/** The longest `owner`, in UTF-8 bytes. */
export const MAX_OWNER_BYTES = 256;

/** `owner`: a non-empty string of at most 256 bytes; by default this host and process. */
export function resolveOwner(value: unknown): string {
  if (value === undefined) return `${hostname()}:${process.pid}`;
  if (typeof value !== "string" || value === "" || Buffer.byteLength(value, "utf8") > MAX_OWNER_BYTES) {
    throw new InvalidArgumentError("options.owner", `a non-empty string of at most ${MAX_OWNER_BYTES} bytes`, value);
  }
  return value;
}

/** The options every server store's locker takes, in the order they are listed and resolved. */
const SERVER_OPTION_NAMES = ["expiry", "prefix", "operationTimeout", "owner"] as const;

/** What {@link snapshotServerOptions} returns: the snapshot, and its first options resolved. */
export interface ServerOptionsSnapshot<K extends string> {
  /** Every option, read once (see `snapshotOptions`). */
  readonly given: OptionsSnapshot<K | (typeof SERVER_OPTION_NAMES)[number]>;
  readonly expiry: number;
  readonly prefix: string;
  readonly operationTimeout: number;
  readonly owner: string;
}

/**
 * Reads a server store's options bag once (`expiry`, `prefix`, `operationTimeout`, then the
 * store's `names`) and resolves its first options in that order: `expiry` (see
 * {@link resolveExpiry}), `prefix`, `operationTimeout`. The store resolves the rest from `given`.
 */
export function snapshotServerOptions<const K extends string>(
  options: unknown,
  names: readonly K[],
): ServerOptionsSnapshot<K> {
  const given = snapshotOptions("options", options, [...SERVER_OPTION_NAMES, ...names]);
  const expiry = resolveExpiry(given.expiry);
  const prefix = resolvePrefix(given.prefix);
  const operationTimeout = resolveOperationTimeout(given.operationTimeout, expiry);
  return { given, expiry, prefix, operationTimeout, owner: resolveOwner(given.owner) };
}

/** What a server locker without options of its own resolves: the core's settings and its prefix. */
export interface ResolvedServerOptions extends ResolvedLockerOptions {
  /** Prepended to every key. */
  readonly prefix: string;
}

/**
 * The settings of a server locker whose only options are the shared ones (`backoff` and
 * `onLockLost` beside those {@link snapshotServerOptions} read), from its snapshot, with `prefix`
 * as the store checked it and `sweepConcurrency` extension calls in flight at once.
 */
export function resolveServerOptions(
  snapshot: ServerOptionsSnapshot<"backoff" | "onLockLost">,
  prefix: string,
  sweepConcurrency: number,
): ResolvedServerOptions {
  const { given, ...server } = snapshot;
  const [backoffMin, backoffMax] = resolveBackoff(given.backoff, server.expiry);
  const onLockLost = resolveOnLockLost(given.onLockLost);
  return { ...server, prefix, backoffMin, backoffMax, onLockLost, sweepConcurrency };
}

/** `prefix`: a string, by default `"globallock:"`. */
function resolvePrefix(value: unknown): string {
  const prefix = value === undefined ? "globallock:" : value;
  if (typeof prefix !== "string") throw new InvalidArgumentError("options.prefix", "a string", prefix);
  return prefix;
}

/** `onLockLost`: a function or undefined. */
export function resolveOnLockLost(value: unknown): ((error: LockLostError) => void) | undefined {
  if (value !== undefined) validateFunction("options.onLockLost", value);
  return value as ((error: LockLostError) => void) | undefined;
}

/** `operationTimeout`: a timer delay below `expiry / 2`; by default `min(2000, expiry / 4)`. */
function resolveOperationTimeout(value: unknown, expiry: number): number {
  const operationTimeout = value === undefined ? Math.min(2000, Math.floor(expiry / 4)) : value;
  validateTimerDelay("options.operationTimeout", operationTimeout);
  if (operationTimeout >= expiry / 2) {
    throw new InvalidArgumentError(
      "options.operationTimeout",
      `a number below expiry / 2 (${expiry / 2})`,
      operationTimeout,
    );
  }
  return operationTimeout;
}

const BACKOFF_NAMES = ["min", "max"] as const;

/**
 * `[min, max]` of the safety-net backoff. `max` defaults to `max(1000, min)` and is capped at
 * `expiry / 2` (but never below `min`); both are timer delays, so the result never exceeds
 * {@link MAX_TIMER_DELAY_MS}.
 */
export function resolveBackoff(value: unknown, expiry: number): [min: number, max: number] {
  const given = snapshotOptions("options.backoff", value, BACKOFF_NAMES);
  const min = given.min === undefined ? 50 : given.min;
  validateTimerDelay("options.backoff.min", min);
  const max = given.max === undefined ? Math.max(1000, min) : given.max;
  validateTimerDelay("options.backoff.max", max, min);
  const capped = Math.min(max, Math.floor(expiry / 2), MAX_TIMER_DELAY_MS);
  return [min, Math.max(min, capped)];
}

/** {@link PooledLockerOptions} resolved; `sweepConcurrency` is 1 (extensions share one session). */
export interface ResolvedPooledLockerOptions extends ResolvedLockerOptions {
  /** Prepended to every key. */
  readonly prefix: string;
  /** How long to wait for a pool connection, in ms. */
  readonly connectTimeout: number;
}

/** What {@link snapshotPooledOptions} returns: the snapshot, and the shared options resolved. */
export interface PooledOptionsSnapshot<K extends string> {
  /** Every option, read once (see `snapshotOptions`). */
  readonly given: OptionsSnapshot<
    K | (typeof SERVER_OPTION_NAMES)[number] | "connectTimeout" | "backoff" | "onLockLost"
  >;
  readonly resolved: ResolvedPooledLockerOptions;
}

/**
 * Reads a pooled locker's options bag once (the server options, `connectTimeout`, `backoff`, the
 * store's `names`, `onLockLost`) and resolves the ones every pooled locker shares; the store
 * resolves its own from `given`.
 */
export function snapshotPooledOptions<const K extends string>(
  options: unknown,
  names: readonly K[],
): PooledOptionsSnapshot<K> {
  const { given, ...server } = snapshotServerOptions(options, ["connectTimeout", "backoff", ...names, "onLockLost"]);
  const connectTimeout = given.connectTimeout === undefined ? 5000 : given.connectTimeout;
  validateTimerDelay("options.connectTimeout", connectTimeout);
  const [backoffMin, backoffMax] = resolveBackoff(given.backoff, server.expiry);
  const onLockLost = resolveOnLockLost(given.onLockLost);
  return {
    given,
    resolved: {
      ...server,
      connectTimeout: connectTimeout as number,
      backoffMin,
      backoffMax,
      onLockLost,
      sweepConcurrency: 1,
    },
  };
}
