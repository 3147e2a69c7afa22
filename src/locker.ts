import { validateFunction, validateKey, validateSignal } from "./internal/validate.js";

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
 * 5. **Auto-extension** (Redis): one sweeper per locker extends every held lock every
 *    `expiry / 2`, only while its token still matches. A lost lock is reported through the
 *    `onLockLost` hook; the holder is never cancelled.
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
   * Stops the locker: idempotent; stops auto-extension at once, refuses new calls, rejects waiters
   * with {@link LockerClosedError}, and resolves when nothing of the locker is running.
   */
  close(): Promise<void>;
}

/**
 * Runs `fn` while holding the lock on `key` (waiting for it like {@link Locker.lock}) and releases
 * the lock afterwards, whether `fn` returns or throws. Resolves to `fn`'s result.
 */
export async function lockAndDo<T>(
  locker: Locker,
  signal: AbortSignal | undefined,
  key: string,
  fn: () => T | Promise<T>,
): Promise<T> {
  validateArguments(signal, key, fn);
  const release = await locker.lock(signal, key);
  try {
    return await fn();
  } finally {
    await release();
  }
}

/**
 * Like {@link lockAndDo} but does not wait: resolves to `[false, undefined]` without running `fn`
 * when someone else holds the lock, otherwise to `[true, result]`.
 */
export async function tryLockAndDo<T>(
  locker: Locker,
  signal: AbortSignal | undefined,
  key: string,
  fn: () => T | Promise<T>,
): Promise<[acquired: boolean, result: T | undefined]> {
  validateArguments(signal, key, fn);
  const [acquired, release] = await locker.tryLock(signal, key);
  if (!acquired) return [false, undefined];
  try {
    return [true, await fn()];
  } finally {
    await release();
  }
}

function validateArguments(signal: unknown, key: unknown, fn: unknown): void {
  validateSignal(signal);
  validateKey(key);
  validateFunction("fn", fn);
}
