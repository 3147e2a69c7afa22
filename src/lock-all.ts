import { InvalidArgumentError } from "./errors.js";
import { noopRelease, ReleaseOnce } from "./internal/release-func.js";
import { validateKey, validateSignal } from "./internal/validate.js";
import type { Locker, ReleaseFunc, ReleaseOutcome } from "./locker.js";

/**
 * Waits until every key of `keys` is locked on `locker` (any {@link Locker}: a lock, a semaphore,
 * a view of a read-write locker) and resolves to one {@link ReleaseFunc} that releases them all.
 *
 * - **Deadlock-free whatever the order.** Duplicates are dropped and the keys are taken one by one
 *   in a single fixed order (sorted by UTF-16 code units), so callers passing the same keys in any
 *   order never wait for each other in a cycle.
 * - **All or nothing.** If `signal` aborts, the locker closes or fails while a key is awaited, the
 *   keys already taken are released before the promise rejects (with the same reason `lock` gave).
 * - The returned release releases every key (concurrently), is idempotent and never rejects;
 *   `await using release = await lockAll(...)` works.
 * - Each key is its own lock, so on a Redis Cluster the keys may live in different hash slots
 *   (no hash tags needed): they are simply locked one after another.
 *
 * Bad input (`keys` not an array, an empty array, a bad key, a bad signal) is an
 * {@link InvalidArgumentError}, thrown before anything is locked.
 */
export async function lockAll(
  locker: Locker,
  signal: AbortSignal | undefined,
  keys: readonly string[],
): Promise<ReleaseFunc> {
  const ordered = validateCall(locker, signal, keys);
  const taken: ReleaseFunc[] = [];
  try {
    for (const key of ordered) taken.push(await locker.lock(signal, key));
  } catch (error) {
    await releaseAll(taken);
    throw error;
  }
  return releaseAllOnce(taken);
}

/**
 * Like {@link lockAll} but does not wait for any holder: tries each key once, in the same fixed
 * order, and resolves to `[true, release]` when it took them all. When one key is taken, it
 * releases the keys it took and resolves to `[false, noopRelease]`; when a `tryLock` rejects, it
 * releases them and rejects with that error.
 */
export async function tryLockAll(
  locker: Locker,
  signal: AbortSignal | undefined,
  keys: readonly string[],
): Promise<[acquired: boolean, release: ReleaseFunc]> {
  const ordered = validateCall(locker, signal, keys);
  const taken: ReleaseFunc[] = [];
  try {
    for (const key of ordered) {
      const [acquired, release] = await locker.tryLock(signal, key);
      if (!acquired) {
        await releaseAll(taken);
        return [false, noopRelease()];
      }
      taken.push(release);
    }
  } catch (error) {
    await releaseAll(taken);
    throw error;
  }
  return [true, releaseAllOnce(taken)];
}

/** Validates the arguments and returns the distinct keys in the order they are taken. */
function validateCall(locker: unknown, signal: unknown, keys: unknown): string[] {
  if (
    typeof locker !== "object" ||
    locker === null ||
    typeof (locker as Locker).lock !== "function" ||
    typeof (locker as Locker).tryLock !== "function"
  ) {
    throw new InvalidArgumentError("locker", "a Locker", locker);
  }
  validateSignal(signal);
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new InvalidArgumentError("keys", "a non-empty array of keys", keys);
  }
  // Read each element once (a plain loop, so holes are seen as `undefined`).
  const distinct = new Set<string>();
  for (let i = 0; i < keys.length; i++) {
    const key: unknown = keys[i];
    validateKey(key);
    distinct.add(key);
  }
  // The default sort compares UTF-16 code units: one total order, independent of locale.
  return [...distinct].sort();
}

/** Releases every one of `releases` (concurrently); never rejects. */
async function releaseAll(releases: readonly ReleaseFunc[]): Promise<void> {
  await Promise.allSettled(releases.map(async (release) => release()));
}

/** One release for all of `releases`: idempotent, never rejects. */
function releaseAllOnce(releases: readonly ReleaseFunc[]): ReleaseFunc {
  return new ReleaseOnce(async (): Promise<ReleaseOutcome> => {
    await releaseAll(releases);
    return "released";
  }).release;
}
