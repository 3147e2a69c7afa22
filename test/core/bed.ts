import { afterEach, expect } from "vitest";
import type { CoreSettings } from "../../src/core/lock-core.js";
import { FakeLocker } from "./fake-locker.js";

/** Resolves after the microtasks queued so far (and those they queue) ran: one macrotask turn. */
export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The test bed of one test file: `locker(settings)` makes a {@link FakeLocker}; after each test
 * every locker made is closed, and its store must have seen no broken promise of the core (see
 * `FakeBackend.violations`) and no unpaired subscription.
 */
export function useBed(): { locker(settings?: Partial<CoreSettings>): FakeLocker } {
  const made: FakeLocker[] = [];
  afterEach(async () => {
    const lockers = made.splice(0);
    await Promise.all(lockers.map((locker) => locker.close()));
    for (const locker of lockers) {
      expect(locker.store.violations).toEqual([]);
      expect(locker.store.watcher.violations).toEqual([]);
    }
  });
  return {
    locker(settings?: Partial<CoreSettings>): FakeLocker {
      const locker = new FakeLocker(settings);
      made.push(locker);
      return locker;
    },
  };
}

/** What `promise` rejected with (an Error "resolved" when it did not reject). */
export function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => new Error("expected a rejection"),
    (error: unknown) => error,
  );
}

/** Asserts that `promise` rejects with exactly `signal.reason`, and the signal did abort. */
export async function expectAbortReason(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  const error = await rejection(promise);
  expect(signal.aborted).toBe(true);
  expect(error).toBe(signal.reason);
}
