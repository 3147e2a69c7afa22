import { MIN_EXPIRY_MS } from "../core/limits.js";
import { InvalidArgumentError, type LockLostError } from "../errors.js";
import { resolveBackoff, resolveOperationTimeout } from "../internal/lease-options.js";
import {
  snapshotOptions,
  validateFunction,
  validatePositiveInteger,
  validateTimerDelay,
} from "../internal/validate.js";

/**
 * Options of {@link PostgresLocker}. Every one is optional; `undefined` means the default, `null`
 * and unknown names are rejected.
 */
export interface PostgresLockerOptions {
  /**
   * Lease length in ms (default `30_000`, at least `200`). While it holds leases the locker confirms
   * its connection every `expiry / 2` at the latest (one `SELECT 1` per batch of leases), and asks PostgreSQL to end the
   * session if it stays idle for `expiry` (`idle_session_timeout`, PostgreSQL 14 and later), so a
   * frozen or cut-off holder's locks are freed after about this long.
   */
  expiry?: number | undefined;
  /** Prepended to every key before it is hashed to a lock id (default `"globallock:"`; may be empty). */
  prefix?: string | undefined;
  /**
   * Timeout of every statement the locker sends, in ms (default `min(2000, expiry / 4)`; below
   * `expiry / 2`). A statement that does not answer in time ends the connection: its locks are
   * reported lost and the server frees them. Counted from when the statement is sent, as the
   * server's silence: an answer already waiting in the socket wins, and time this process's event
   * loop spent stalled does not count (the locker's own timer, not pg's `query_timeout`).
   */
  operationTimeout?: number | undefined;
  /**
   * How long the locker waits for a connection from the pool, in ms (default `5000`). An exhausted
   * pool or an unreachable server then rejects with a `StoreUnavailableError`.
   */
  connectTimeout?: number | undefined;
  /**
   * Safety-net wait of a blocked `lock` between attempts when no release notification arrives, in
   * ms: jittered exponential from `min` to `max` (default `{ min: 50, max: 1000 }`; `max` capped at
   * `expiry / 2`).
   */
  backoff?:
    | {
        /** Shortest wait between attempts, in ms. */
        min?: number | undefined;
        /** Longest wait between attempts, in ms. */
        max?: number | undefined;
      }
    | undefined;
  /**
   * The sequence fencing tokens come from (default `"globallock_fencing"`, optionally
   * schema-qualified), created with `CREATE SEQUENCE IF NOT EXISTS` on the first fenced acquisition.
   */
  fencingSequence?: string | undefined;
  /**
   * Called (synchronously, errors swallowed) when a held lock is found lost: its connection ended
   * (the server freed its session locks) or could not be confirmed in time. The holder is not
   * cancelled; this is how it can find out.
   */
  onLockLost?: ((error: LockLostError) => void) | undefined;
}

/** {@link PostgresLockerOptions} with every default filled in and validated. */
export interface ResolvedPostgresLockerOptions {
  /** Lease length in ms. */
  readonly expiry: number;
  /** Prepended to every key. */
  readonly prefix: string;
  /** Timeout of every command, in ms. */
  readonly operationTimeout: number;
  /** How long to wait for a pool connection, in ms. */
  readonly connectTimeout: number;
  /** Shortest safety-net wait between attempts, in ms. */
  readonly backoffMin: number;
  /** Longest safety-net wait between attempts, in ms. */
  readonly backoffMax: number;
  /** The sequence fencing tokens come from. */
  readonly fencingSequence: string;
  /** The hook called when a held lock is found lost. */
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
  /** Extension statements in flight at once: 1 (they share the locker's one session). */
  readonly sweepConcurrency: number;
}

const OPTION_NAMES = [
  "expiry",
  "prefix",
  "operationTimeout",
  "connectTimeout",
  "backoff",
  "fencingSequence",
  "onLockLost",
] as const satisfies ReadonlyArray<keyof PostgresLockerOptions>;

/** A lowercase identifier, optionally schema-qualified: used in SQL as written. */
const SEQUENCE_NAME = /^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$/;

/**
 * Validates `options` and fills in the defaults; each option is read exactly once. Throws
 * {@link InvalidArgumentError}.
 */
export function resolvePostgresOptions(options: unknown): ResolvedPostgresLockerOptions {
  const given = snapshotOptions("options", options, OPTION_NAMES);
  const expiry = given.expiry === undefined ? 30_000 : given.expiry;
  validatePositiveInteger("options.expiry", expiry, MIN_EXPIRY_MS);
  validateTimerDelay("options.expiry", expiry);
  const prefix = given.prefix === undefined ? "globallock:" : given.prefix;
  if (typeof prefix !== "string") throw new InvalidArgumentError("options.prefix", "a string", prefix);
  const operationTimeout = resolveOperationTimeout(given.operationTimeout, expiry);
  const connectTimeout = given.connectTimeout === undefined ? 5000 : given.connectTimeout;
  validateTimerDelay("options.connectTimeout", connectTimeout);
  const [backoffMin, backoffMax] = resolveBackoff(given.backoff, expiry);
  const fencingSequence = given.fencingSequence === undefined ? "globallock_fencing" : given.fencingSequence;
  if (typeof fencingSequence !== "string" || !SEQUENCE_NAME.test(fencingSequence)) {
    throw new InvalidArgumentError(
      "options.fencingSequence",
      "a lowercase SQL identifier, optionally schema-qualified (such as globallock_fencing or locks.fencing)",
      fencingSequence,
    );
  }
  const onLockLost = given.onLockLost;
  if (onLockLost !== undefined) validateFunction("options.onLockLost", onLockLost);
  return {
    expiry,
    prefix,
    operationTimeout,
    connectTimeout,
    backoffMin,
    backoffMax,
    fencingSequence,
    onLockLost: onLockLost as ((error: LockLostError) => void) | undefined,
    sweepConcurrency: 1,
  };
}
