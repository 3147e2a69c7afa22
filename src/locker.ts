// Referenced from doc comments only.
import type { InvalidArgumentError, LockLostError, StoreUnavailableError, UnsupportedError } from "./errors.js";
import { validateFunction, validateKey, validateSignal } from "./internal/validate.js";

export { MAX_KEY_BYTES } from "./core/limits.js";

/**
 * Releases a lock obtained from {@link Locker.lock} or {@link Locker.tryLock}.
 *
 * - Idempotent: calling it twice, concurrently, after the lock was lost, or after the locker
 *   closed is harmless; every call resolves once the (single) release attempt has finished.
 * - Never rejects and never hangs: it has its own short timeout and does not depend on the
 *   signal the lock was taken with. If the store cannot be reached the lock simply expires.
 * - Never deletes a lock someone else holds now: ownership is checked atomically with a random
 *   per-acquisition token.
 * - The release returned by a failed `tryLock` is a no-op.
 * - Supports `await using release = await locker.lock(signal, key)`.
 */
export type ReleaseFunc = (() => Promise<void>) & AsyncDisposable;

/**
 * What a release found, for callers who ask ({@link Lease.releaseWithOutcome}):
 * - `"released"`: the lock was still ours and is now deleted;
 * - `"expired"`: the key was already gone (expired, or deleted behind our back);
 * - `"taken"`: the key now belongs to another holder (it was left alone);
 * - `"handed-off"`: the lease was handed to another process ({@link Lease.handOff}): nothing was sent;
 * - `"unknown"`: the store could not be asked; the lock expires on its own.
 */
export type ReleaseOutcome = "released" | "expired" | "taken" | "handed-off" | "unknown";

/** Options of {@link Locker.acquire} and {@link Locker.tryAcquire}. */
export interface AcquireOptions {
  /**
   * Issue a fencing token with the grant (default `false`). Supported where the grant is exclusive:
   * locks ({@link MemoryLocker}; {@link RedisLocker} on one node or a Cluster), semaphores with
   * `limit: 1`, and the `write` view of a read-write locker. Elsewhere (a multi-node quorum, a
   * semaphore with `limit > 1`, the `read` view) it is an {@link UnsupportedError}.
   */
  fencing?: boolean | undefined;
  /**
   * Permits this acquisition takes (default `1`): an integer from 1 to the locker's limit. A lock's
   * limit is 1, and so is each view's of a read-write locker; a semaphore's is its `limit`.
   */
  weight?: number | undefined;
  /**
   * Keep the lease alive while it is held (default `true`). With `false` the lease is never
   * extended: it simply expires `expiry` ms after it was granted unless released first (the
   * "at most once per period" job). Its `lost` signal then aborts at expiry, with reason
   * `"expired"`, and {@link Lease.releaseWithOutcome} says `"expired"`.
   */
  autoExtend?: boolean | undefined;
  /**
   * This acquisition's lease length in ms (default: the locker's `expiry`). An in-memory lock is
   * held by its process and never expires while auto-extended; with `autoExtend: false` it needs
   * an `expiry` and is freed after it.
   */
  expiry?: number | undefined;
  /**
   * The longest this lease may be kept, in ms (default: no cap; at least the lease's `expiry`).
   * The lease is extended only while an extension would not carry it past `maxHold` from its
   * grant; then it runs out (within its last `expiry / 2` before `maxHold`) and `lost` aborts with
   * a {@link LockLostError} whose reason is `"max-hold"` (reported to `onLockLost` too). The caller
   * is still not cancelled. Stops a stuck holder from renewing a lock forever. With
   * `autoExtend: false` it is an {@link InvalidArgumentError} (such a lease already ends at
   * `expiry`). An in-memory lock, held until released, is freed at `maxHold`.
   */
  maxHold?: number | undefined;
}

/** Options of {@link Locker.adopt}. */
export interface AdoptOptions {
  /** Keep the adopted lease alive while it is held (default `true`; see {@link AcquireOptions}). */
  autoExtend?: boolean | undefined;
}

/** Who holds a key and how many wait for it (see {@link Locker.inspect}). */
export interface LockInfo {
  /** The key inspected (without prefix). */
  readonly key: string;
  /** Its holders: none when free, one for a lock, several for a semaphore or readers. */
  readonly holders: readonly HolderInfo[];
  /** Waiters the store knows of, in every process (0 where the store cannot tell). */
  readonly waiting: number;
}

/** Options of {@link Locker.list}. */
export interface ListOptions {
  /**
   * List only keys that start with this string (default `""`: every key). A filter on the keys
   * the caller passes to `lock` and the like, not on the store's own names (a locker's `prefix`
   * option is added by the locker and never shown).
   */
  prefix?: string | undefined;
  /** The most keys listed (default 1000): an integer from 1 to 10000. */
  limit?: number | undefined;
}

/** One holder of a key (see {@link LockInfo}). */
export interface HolderInfo {
  /** The holder locker's `owner` option (default `${os.hostname()}:${process.pid}`; `""` if unknown). */
  readonly owner: string;
  /** `"exclusive"` for a lock or a writer; `"shared"` for a reader or a semaphore's holder. */
  readonly mode: "exclusive" | "shared";
  /** Permits held, as the caller counts them (1 for a lock and for either view of a read-write locker). */
  readonly weight: number;
  /** Time left on the lease as the store sees it, in ms (`Infinity`: held until released). */
  readonly expiresInMs: number;
  /** The fencing token of the grant, where the store keeps one per holder. */
  readonly fencingToken?: bigint;
}

/**
 * One held lock, as returned by {@link Locker.acquire}. Besides its release, it tells its holder
 * when the lock is lost, without cancelling anything.
 */
export interface Lease extends AsyncDisposable {
  /** The key this lease holds. */
  readonly key: string;
  /** Releases the lock; see {@link ReleaseFunc}. `await using lease = ...` calls it too. */
  readonly release: ReleaseFunc;
  /**
   * Aborts, with a {@link LockLostError} as its reason, when the lock is found lost: an extension
   * saw the key gone or owned by another token, or the lease's local monotonic deadline passed
   * without a successful extension — whichever comes first. Never aborts for a memory lock.
   */
  readonly lost: AbortSignal;
  /**
   * A number that rises with every grant of this key, issued only while the lock is really held
   * (present when `acquire` was called with `{ fencing: true }`). Pass it to the protected resource
   * and have it reject writes with a lower token than it has seen (see `fencedWrite`).
   */
  readonly fencingToken?: bigint;
  /**
   * Throws the {@link LockLostError} once the lease is no longer safely held: lost, past its local
   * deadline (checked synchronously, so it is right even after a blocked event loop), or released.
   */
  assertHeld(): void;
  /** Releases (once, like `release`) and resolves to what the release found. Never rejects. */
  releaseWithOutcome(): Promise<ReleaseOutcome>;
  /**
   * Hands the lease to another process: extends it once (so the receiver gets a full lease), stops
   * keeping it here, and resolves to a handle (a string naming the store, its prefix, the key, the
   * token, the weight, the fencing token and the lease length) for {@link Locker.adopt}. This
   * lease's `release` then does nothing (`releaseWithOutcome` says `"handed-off"`), its `lost` stays
   * quiet, and `assertHeld` throws (reason `"handed-off"`). The handle is a secret: whoever has it
   * can take over and release the lock. Until it is adopted the lease runs out on its own.
   * Rejects with {@link UnsupportedError} where the store ties a lock to its holder's connection or
   * process (memory, PostgreSQL, MySQL), with a {@link LockLostError} when the lease is no longer
   * held, and with {@link StoreUnavailableError} when the extension fails (the lease stays here).
   */
  handOff(): Promise<string>;
}

/**
 * A lock service: mutual exclusion per string key, in one process ({@link MemoryLocker}) or
 * across processes ({@link RedisLocker}). The contract every implementation obeys:
 *
 * 1. **Mutual exclusion.** While a `release` for key K is live, no other `lock`/`tryLock` on K
 *    succeeds (for Redis: in any process using the same Redis), as long as the lock is not lost.
 *    Locks are not re-entrant: a second `lock` on a held key waits, even from the same caller.
 * 2. **Release is a function**, idempotent, never rejecting (see {@link ReleaseFunc}). Held locks
 *    are tracked per acquisition (token), not per key, so a stale release never touches a later
 *    holder's lock or bookkeeping.
 * 3. **Waiting is abortable.** `lock` waits until it holds K, `signal` aborts (rejects with
 *    `signal.reason`), or the locker closes (rejects with {@link LockerClosedError}). An
 *    already-aborted signal rejects at once with nothing sent to the store. An abort racing a
 *    successful acquisition never leaks a lock. There is no cap on tries.
 * 4. **Waiters wake on release** (in-process notification; Redis pub/sub), with a bounded,
 *    jittered backoff as the safety net for expiries and lost notifications.
 * 5. **Auto-extension** (Redis): the locker extends every held lock every `expiry / 2`, each
 *    scheduled from its own validity (earlier when `operationTimeout` requires it), batched,
 *    only while its token still matches. A lost lock is reported through the `onLockLost` hook;
 *    the holder is never cancelled.
 * 6. **Errors are honest.** "Someone else holds it" means wait (`lock`) or `false` (`tryLock`);
 *    an unreachable store is a {@link StoreUnavailableError} carrying its cause, never a hang and
 *    never a false success.
 * 7. **Bad input** gets an {@link InvalidArgumentError} before anything is sent.
 * 8. **`close()`** is idempotent, refuses new calls, rejects waiters, and resolves when nothing
 *    of the locker is running. It does not close the caller's connections, and it does not delete
 *    held locks: they are no longer extended and expire.
 */
export interface Locker {
  /**
   * Waits until the lock on `key` is held and resolves to its {@link ReleaseFunc}.
   * Rejects with `signal.reason` on abort, {@link LockerClosedError} when the locker closes,
   * {@link StoreUnavailableError} when the store fails, {@link InvalidArgumentError} on bad input.
   */
  lock(signal: AbortSignal | undefined, key: string): Promise<ReleaseFunc>;

  /**
   * Makes one attempt to take the lock on `key` without waiting for its holder.
   * Resolves to `[true, release]` when taken and `[false, noopRelease]` when someone else holds it.
   * Store failures reject with {@link StoreUnavailableError}; they never read as `false`.
   */
  tryLock(signal: AbortSignal | undefined, key: string): Promise<[acquired: boolean, release: ReleaseFunc]>;

  /**
   * Waits like {@link Locker.lock} and resolves to a {@link Lease}: the release plus a `lost` signal,
   * `assertHeld()`, and (with `{ fencing: true }`) a fencing token.
   */
  acquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease>;

  /**
   * Makes one attempt like {@link Locker.tryLock} and resolves to a {@link Lease} when it acquired,
   * or to `undefined` when the key (or, for a semaphore, not enough of its permits) is taken.
   */
  tryAcquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease | undefined>;

  /**
   * Takes over a lease another process handed off with {@link Lease.handOff}: checks that it is
   * still held with the handed token and swaps that token for one of this locker atomically (a
   * handle adopted twice never gives two holders), extends it, keeps it (unless
   * `autoExtend: false`) and releases it from here. Its fencing token is the one it was granted.
   * Rejects with {@link LockLostError} when the lease is no longer held with that token (released,
   * expired, or already adopted), {@link InvalidArgumentError} for a malformed handle or one from
   * another kind of locker or prefix, and {@link UnsupportedError} where the store ties a lock to
   * its holder's connection or process (memory, PostgreSQL, MySQL).
   */
  adopt(signal: AbortSignal | undefined, handle: string, options?: AdoptOptions): Promise<Lease>;

  /**
   * Who holds `key` and how many wait for it, in every process that uses the store (the Web Locks
   * API's `query()`; memory: this locker's holders and waiters). Reads only: it changes nothing
   * and sends at most a few commands. Rejects with {@link StoreUnavailableError} when the store
   * fails and {@link InvalidArgumentError} on bad input.
   */
  inspect(signal: AbortSignal | undefined, key: string): Promise<LockInfo>;

  /**
   * Which keys are held now, in every process that uses the store: a {@link LockInfo} (holders and
   * waiters, as {@link Locker.inspect} tells them) for each held key that starts with
   * `options.prefix`, at most `options.limit` of them (default 1000, at most 10000), sorted by key.
   * A key nobody holds is left out. Bounded and read-only: the store is read in small steps (Redis:
   * `SCAN` with a `COUNT`, never `KEYS`; etcd: a range read with a limit), nothing is changed, and
   * the store is never blocked. A store that reads its keys in no particular order (Redis) lists
   * the first `limit` it finds, not the first by key. Not a snapshot: a key taken or released while
   * the list is read may or may not be in it.
   *
   * Rejects with {@link UnsupportedError}, naming why, where the store cannot name its keys
   * (PostgreSQL and MySQL locks are named by a hash of the key); with
   * {@link InvalidArgumentError} for a bad `prefix` or `limit`; with `signal.reason` on abort
   * (at once when it has aborted already); with {@link StoreUnavailableError} when the store fails.
   */
  list(signal: AbortSignal | undefined, options?: ListOptions): Promise<LockInfo[]>;

  /**
   * Stops the locker: idempotent; stops auto-extension at once, refuses new calls, rejects waiters
   * with {@link LockerClosedError}, and resolves when nothing of the locker is running.
   */
  close(): Promise<void>;
}

/**
 * Runs `fn` while holding the lock on `key` (waiting for it like {@link Locker.acquire}) and
 * releases the lock afterwards, whether `fn` returns or throws. `fn` receives the {@link Lease}, so
 * it can pass `lease.lost` on or call `lease.assertHeld()` before it commits. Resolves to `fn`'s
 * result. `options` are {@link Locker.acquire}'s (a `maxHold`, a `weight`, fencing, …).
 */
export async function lockAndDo<T>(
  locker: Locker,
  signal: AbortSignal | undefined,
  key: string,
  fn: (lease: Lease) => T | Promise<T>,
  options?: AcquireOptions,
): Promise<T> {
  validateArguments(signal, key, fn);
  const lease = await locker.acquire(signal, key, options);
  try {
    return await fn(lease);
  } finally {
    await lease.release();
  }
}

/**
 * Like {@link lockAndDo} but does not wait: resolves to `[false, undefined]` without running `fn`
 * when someone else holds the lock, otherwise to `[true, result]` (so `if (ok)` narrows `result`).
 */
export async function tryLockAndDo<T>(
  locker: Locker,
  signal: AbortSignal | undefined,
  key: string,
  fn: (lease: Lease) => T | Promise<T>,
  options?: AcquireOptions,
): Promise<[acquired: true, result: T] | [acquired: false, result: undefined]> {
  validateArguments(signal, key, fn);
  const lease = await locker.tryAcquire(signal, key, options);
  if (lease === undefined) return [false, undefined];
  try {
    return [true, await fn(lease)];
  } finally {
    await lease.release();
  }
}

function validateArguments(signal: unknown, key: unknown, fn: unknown): void {
  validateSignal(signal);
  validateKey(key);
  validateFunction("fn", fn);
}

/** What a locker's lease keeper measured (`leaseStats`), for tests, benchmarks and the curious. */
export interface LeaseKeeperStats {
  /** Locks extended successfully, counted per lock. */
  readonly extensions: number;
  /** Extension commands sent (each covers up to 256 locks of one node). */
  readonly batches: number;
  /** Extensions that failed transiently and were retried. */
  readonly retries: number;
  /**
   * The least validity a lock had left when its extension was confirmed, in ms (`Infinity`
   * before the first extension): how close to its deadline the closest call came.
   */
  readonly minHeadroomMs: number;
  /** The latest the keeper's timer has fired after it was due, in ms. */
  readonly maxLatenessMs: number;
}
