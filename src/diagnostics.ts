/**
 * What globallock publishes on `node:diagnostics_channel`: the channel names and the messages.
 *
 * Nothing is published, built or timed while a channel has no subscriber: each locker checks
 * `hasSubscribers` before it makes a message, so an application that does not listen pays one
 * boolean check per call. Messages are plain objects; subscribers must not change them. A
 * subscriber that throws does not disturb the lock (Node.js catches the error and rethrows it on
 * the next tick as an `uncaughtException`, as it does for every channel).
 *
 * ```ts
 * import diagnostics_channel from "node:diagnostics_channel";
 * import { type AcquireMessage, ACQUIRE_CHANNEL, RELEASE_CHANNEL, type ReleaseMessage } from "globallock";
 *
 * diagnostics_channel.tracingChannel<unknown, AcquireMessage>(ACQUIRE_CHANNEL).subscribe({
 *   start() {},
 *   end() {},
 *   asyncStart() {},
 *   asyncEnd(message) {
 *     console.log(message.kind, message.key, message.outcome, message.waitedMs);
 *   },
 *   error() {},
 * });
 * diagnostics_channel.subscribe(RELEASE_CHANNEL, (message) => {
 *   const { key, heldMs, outcome } = message as ReleaseMessage;
 *   console.log(key, outcome, heldMs);
 * });
 * ```
 *
 * @module
 */
// Besides the payload types, referenced from doc comments only.

import type { CombinedLocker } from "./combined/combined-locker.js";
import type {
  InvalidArgumentError,
  LockerClosedError,
  LockLostError,
  LockLostReason,
  StoreUnavailableError,
  UnsupportedError,
} from "./errors.js";
import type { FileLocker } from "./file/file-locker.js";
import type { Locker, ReleaseOutcome } from "./locker.js";
import type { MemoryLocker } from "./memory/memory-locker.js";
import type { MemoryReadWriteLocker } from "./memory/memory-read-write-locker.js";
import type { MemorySemaphore } from "./memory/memory-semaphore.js";
import type { PostgresLocker } from "./postgres/postgres-locker.js";
import type { RedisLocker } from "./redis/redis-locker.js";
import type { RedisReadWriteLocker } from "./redis/redis-read-write-locker.js";
import type { RedisSemaphore } from "./redis/redis-semaphore.js";

/**
 * Name of the tracing channel of every `lock`, `tryLock`, `acquire` and `tryAcquire` call
 * (`diagnostics_channel.tracingChannel(ACQUIRE_CHANNEL)`; its channels are
 * `tracing:globallock:acquire:start`, `:end`, `:asyncStart`, `:asyncEnd` and `:error`). Every call
 * is traced as `TracingChannel.tracePromise` does it, with one {@link AcquireMessage} as the
 * context: `start` when the call begins; `end` when its synchronous part returned (the promise);
 * `error` when it rejects; `asyncStart` and `asyncEnd` when it settles (with `result` or `error`).
 * Stores bound to the `start` channel (`bindStore`) are active while the call runs.
 */
export const ACQUIRE_CHANNEL = "globallock:acquire";

/** Name of the channel of releases: one {@link ReleaseMessage} per release that ran. */
export const RELEASE_CHANNEL = "globallock:release";

/**
 * Name of the channel of lease extensions (Redis, file and PostgreSQL lockers; memory leases are
 * never extended and a {@link CombinedLocker} leaves extending to its members): one
 * {@link ExtendMessage} per extension command and outcome.
 */
export const EXTEND_CHANNEL = "globallock:extend";

/** Name of the channel of lost leases: one {@link LostMessage} per lease found lost. */
export const LOST_CHANNEL = "globallock:lost";

/**
 * Which kind of locker published a message: the store (`memory`, `redis`, `file`, `postgres`, or
 * `combined` for a locker over member lockers) and the primitive (`lock`: {@link MemoryLocker},
 * {@link RedisLocker}, {@link FileLocker}, {@link PostgresLocker}, {@link CombinedLocker};
 * `semaphore`: {@link MemorySemaphore}, {@link RedisSemaphore}; `read` and `write`: the views of
 * {@link MemoryReadWriteLocker} and {@link RedisReadWriteLocker}).
 *
 * A {@link CombinedLocker} publishes its own messages (`"combined-lock"`: one traced call, one
 * release, one loss per combined lease) and its members, being lockers themselves, publish theirs
 * under their own kinds — so one combined acquisition shows as one `"combined-lock"` call around
 * its members' calls. It publishes no extension messages of its own: its members extend.
 */
export type LockerKind = `${LockerStore}-${"lock" | "semaphore" | "read" | "write"}`;

/** The store a locker keeps its locks in, as its {@link LockerKind} names it. */
export type LockerStore =
  | "memory"
  | "redis"
  | "file"
  | "postgres"
  | "postgres-table"
  | "mysql"
  | "mysql-table"
  | "sqlite"
  | "etcd"
  | "zookeeper"
  | "memcached"
  | "combined";

/** Which {@link Locker} method a traced call is. */
export type AcquireMode = "lock" | "tryLock" | "acquire" | "tryAcquire";

/**
 * How a traced call ended:
 * - `"acquired"`: it holds the key (`lock` and `acquire` end so or reject);
 * - `"not-acquired"`: `tryLock` or `tryAcquire` found the key (or its permits) taken;
 * - `"aborted"`: it rejected with its signal's reason (while waiting, or the signal was aborted
 *   before the call);
 * - `"closed"`: it rejected with a {@link LockerClosedError};
 * - `"error"`: any other rejection: {@link StoreUnavailableError} (the store could not be asked),
 *   {@link InvalidArgumentError}, {@link UnsupportedError}.
 */
export type AcquireOutcome = "acquired" | "not-acquired" | "aborted" | "closed" | "error";

/**
 * The context of one traced acquisition call ({@link ACQUIRE_CHANNEL}). One object travels
 * through all five events of the call, filled in as things become known:
 *
 * - at `start`: `key`, `locker`, `kind`, `mode`, `attempts` (0), and `weight` for `lock` and
 *   `tryLock` (1); `waitedMs` and `outcome` are `undefined`;
 * - at `end` (the synchronous part returned): `weight` too, once the options were validated;
 * - at `error`, `asyncStart`, `asyncEnd`: everything — `waitedMs`, the final `attempts`,
 *   `outcome`, and `result` (what the call resolved to) or `error` (what it rejected with), as
 *   `tracePromise` sets them.
 */
export interface AcquireMessage {
  /** The caller's key (without the Redis prefix), as passed. */
  readonly key: string;
  /** The public locker object called (for a read-write locker: its `read` or `write` view). */
  readonly locker: Locker;
  /** Which kind of locker it is. */
  readonly kind: LockerKind;
  /** Which method was called. */
  readonly mode: AcquireMode;
  /**
   * Permits asked for, as the caller counts them: 1 for a lock, for `lock`/`tryLock`, and for
   * either view of a read-write locker; `options.weight` for a semaphore's `acquire`.
   * `undefined` until the options are validated (and for a call refused for its options).
   */
  readonly weight: number | undefined;
  /**
   * Attempts to take the key so far. Redis: acquisition commands sent (a waiter handed the key by
   * a release's grant sends none for it, so a hand-off usually shows 1). File: takes tried in the
   * lock directory. PostgreSQL: `pg_try_advisory_lock` statements sent. Memory: takes tried in the
   * locker's table (a waiting caller is handed the key by a release, so a hand-off usually shows
   * 1). Combined: 1 once the call asked its members (they count their own attempts in their own
   * messages). 0 for a call refused before, and for a `tryLock`/`tryAcquire` answered without
   * asking the store (this locker holds the key, or queues callers for it).
   */
  readonly attempts: number;
  /** Ms from the call to its outcome (waiting included); `undefined` until it settles. */
  readonly waitedMs: number | undefined;
  /** How the call ended; `undefined` until it settles. */
  readonly outcome: AcquireOutcome | undefined;
  /** What the call resolved to (set at `asyncStart`). */
  readonly result?: unknown;
  /** What the call rejected with (set at `error`). */
  readonly error?: unknown;
}

/**
 * A release ran ({@link RELEASE_CHANNEL}): published once per lease or release function, when
 * the release has found its outcome (after the round trip, for Redis). Not published for the
 * no-op release of a failed `tryLock`.
 */
export interface ReleaseMessage {
  /** The caller's key. */
  readonly key: string;
  /** The public locker that granted the lease. */
  readonly locker: Locker;
  /** Which kind of locker it is. */
  readonly kind: LockerKind;
  /**
   * Ms from the grant to the release's outcome; `undefined` when nobody subscribed to this
   * channel at the time of the grant (the grant time is only taken while someone listens).
   */
  readonly heldMs: number | undefined;
  /** What the release found (see {@link ReleaseOutcome}). */
  readonly outcome: ReleaseOutcome;
}

/**
 * What an extension found for some leases:
 * - `"extended"`: extended (their token still held the key);
 * - `"taken"`: the key was gone or held by another token: the leases are lost (a
 *   {@link LostMessage} follows for each);
 * - `"expired"`: their validity had run out before the command could be sent: lost too;
 * - `"retry"`: the command failed (timeout, connection, cluster redirection...; see `error`):
 *   the leases may still be held and their extension is retried while there is time left.
 */
export type ExtendOutcome = "extended" | "taken" | "expired" | "retry";

/**
 * An extension returned ({@link EXTEND_CHANNEL}). Count failures with `count`, not with the number
 * of messages:
 *
 * - Redis lockers: the lease keeper extends leases in batches (up to 256 per command); one message
 *   is published per batch, outcome and locker, so a batch whose leases all extended is one message.
 * - {@link FileLocker}: each lease is extended on its own (a rename of its entry): one message per
 *   extension, `count` 1; `"expired"` when its timer found the lease run out before it could try.
 * - {@link PostgresLocker}: the heartbeat (`SELECT 1` on the locker's one session) extends every
 *   lease held on the session: one message per heartbeat, for the auto-extended leases held then.
 *   A heartbeat that fails ends the session and loses its leases: its message has their loss
 *   reason as `outcome` (`"taken"`, or `"expired"` when the server ended an idle session), its
 *   `error`, and comes before their lost messages. Nothing is retried, so there is no `"retry"`.
 * - Not published by memory lockers (never extended) nor by a {@link CombinedLocker} (its members
 *   extend and publish).
 */
export interface ExtendMessage {
  /** The first key of `keys` (the lease closest to its deadline). */
  readonly key: string;
  /** The caller's keys of the leases with this outcome (a key held twice appears twice). */
  readonly keys: readonly string[];
  /** `keys.length`: leases with this outcome in the batch. */
  readonly count: number;
  /** The public locker holding these leases. */
  readonly locker: Locker;
  /** Which kind of locker it is. */
  readonly kind: LockerKind;
  /** What the extension found for them. */
  readonly outcome: ExtendOutcome;
  /**
   * Why the command failed: for `"retry"`, and for a failed PostgreSQL heartbeat; `undefined`
   * otherwise.
   */
  readonly error: Error | undefined;
  /**
   * Sweep lag: how many ms later than planned the lease keeper sent the command — its timer's
   * lateness (a busy event loop, a long GC pause) plus, for Redis, any wait for a free slot under
   * `sweepConcurrency`. 0 when on time, and for a batch collected before anyone listened.
   */
  readonly lagMs: number;
  /** Ms from sending the command to its answer (or failure). */
  readonly elapsedMs: number;
}

/** A lease was found lost ({@link LOST_CHANNEL}): published once per lease, before `onLockLost`. */
export interface LostMessage {
  /** The caller's key. */
  readonly key: string;
  /** The public locker that granted the lease. */
  readonly locker: Locker;
  /** Which kind of locker it is. */
  readonly kind: LockerKind;
  /**
   * Why: `"taken"` (an extension found the key gone or another holder's; for PostgreSQL, the
   * session holding it dropped) or `"expired"`. A {@link CombinedLocker}'s loss has the reason of
   * the member loss that broke its strategy.
   */
  readonly reason: LockLostReason;
  /** The error the lease's `lost` signal aborts with (and `onLockLost` receives). */
  readonly error: LockLostError;
  /**
   * True when the lease was acquired with `autoExtend: false` and simply reached its expiry: what
   * its holder asked for, so `onLockLost` is not called for it. Count real losses with
   * `expected === false`.
   */
  readonly expected: boolean;
}
