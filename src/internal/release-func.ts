import type { ReleaseFunc } from "../locker.js";

/**
 * Wraps a release routine into a {@link ReleaseFunc}: the routine runs at most once (started
 * synchronously on the first call), every call returns the same promise, and that promise never
 * rejects.
 */
export function createReleaseFunc(routine: () => Promise<void> | void): ReleaseFunc {
  let running: Promise<void> | undefined;
  const release = (): Promise<void> => {
    running ??= runSafely(routine);
    return running;
  };
  return Object.assign(release, { [Symbol.asyncDispose]: release });
}

async function runSafely(routine: () => Promise<void> | void): Promise<void> {
  try {
    await routine();
  } catch {
    // A release never rejects: a lock that could not be deleted expires on its own.
  }
}

/** The release returned by a `tryLock` that did not acquire: does nothing. */
export function noopRelease(): ReleaseFunc {
  return createReleaseFunc(() => undefined);
}
