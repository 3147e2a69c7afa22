/** FaultyLocker (globallock/testing): a user's "lock lost" and "store down" paths, exercised without a server. */
import { describe, expect, it } from "vitest";
import {
  InvalidArgumentError,
  type Lease,
  type Locker,
  LockLostError,
  lockAndDo,
  MemoryLocker,
  StoreUnavailableError,
} from "../../src/index.js";
import { FaultyLocker } from "../../src/testing/index.js";
import { lockerContract, whenAborted } from "../contracts/contract.js";

/**
 * What a user might write: run `step` under the lock, check the lease is still held before
 * committing, and try again (up to `attempts` times) when the lock was lost or the store was down.
 * Resolves to the attempt that succeeded.
 */
async function runWithRetry(
  locker: Locker,
  key: string,
  attempts: number,
  step: (lease: Lease, attempt: number) => Promise<void>,
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await lockAndDo(locker, undefined, key, async (lease) => {
        await step(lease, attempt);
        lease.assertHeld(); // commit only while still held
        return attempt;
      });
    } catch (error) {
      const retryable = error instanceof LockLostError || error instanceof StoreUnavailableError;
      if (!retryable || attempt === attempts) throw error;
    }
  }
}

describe("FaultyLocker", () => {
  it("exercises retry-on-loss: a lease lost mid-step is retried and the second attempt commits", async () => {
    const locker = new FaultyLocker();
    const seen: string[] = [];
    const done = await runWithRetry(locker, "job", 3, async (lease, attempt) => {
      if (attempt === 1) {
        expect(locker.loseLease("job")).toBe(1);
        expect(lease.lost.aborted).toBe(true);
        seen.push((lease.lost.reason as LockLostError).reason);
      }
    });
    expect(done).toBe(2);
    expect(seen).toEqual(["expired"]);
    // The lost lease freed the key, and the retry released it: free now.
    expect((await locker.tryLock(undefined, "job"))[0]).toBe(true);
    await locker.close();
  });

  it("exercises store-down: the next acquisitions fail with StoreUnavailableError, then work again", async () => {
    const locker = new FaultyLocker();
    locker.failNext("acquire", 2);
    const attempts: number[] = [];
    await expect(runWithRetry(locker, "job", 2, async () => {})).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await runWithRetry(locker, "job", 1, async (_lease, attempt) => void attempts.push(attempt))).toBe(1);
    expect(attempts).toEqual([1]);
    await locker.close();
  });

  it("reports a failed release as unknown without rejecting, and frees the key", async () => {
    const locker = new FaultyLocker();
    const lease = await locker.acquire(undefined, "k");
    locker.failNext("release");
    expect(await lease.releaseWithOutcome()).toBe("unknown");
    expect((await locker.tryLock(undefined, "k"))[0]).toBe(true);
    await locker.close();
  });

  it("loses the oldest held lease when its extension finds the store down, then the next one granted", async () => {
    const locker = new FaultyLocker();
    const first = await locker.acquire(undefined, "a");
    locker.failNext("extend", 2);
    expect(((await whenAborted(first.lost)) as LockLostError).reason).toBe("expired");
    const second = await locker.acquire(undefined, "b");
    expect(((await whenAborted(second.lost)) as LockLostError).reason).toBe("expired");
    expect(() => second.assertHeld()).toThrow(LockLostError);
    const third = await locker.acquire(undefined, "c");
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(third.lost.aborted).toBe(false);
    expect(await first.releaseWithOutcome()).toBe("expired");
    expect(await third.releaseWithOutcome()).toBe("released");
    await locker.close();
  });

  it("wraps any locker, loses with the reason asked for, and refuses bad arguments", async () => {
    const inner = new MemoryLocker();
    const locker = new FaultyLocker(inner);
    const lease = await locker.acquire(undefined, "k");
    expect(locker.loseLease("k", "taken")).toBe(1);
    expect((lease.lost.reason as LockLostError).reason).toBe("taken");
    expect(await lease.releaseWithOutcome()).toBe("taken");
    expect(locker.loseLease("k")).toBe(0);
    expect(() => locker.failNext("explode" as never)).toThrow(InvalidArgumentError);
    expect(() => locker.failNext("acquire", 0)).toThrow(InvalidArgumentError);
    expect(() => locker.loseLease("k", "nope" as never)).toThrow(InvalidArgumentError);
    expect(() => new FaultyLocker({} as Locker)).toThrow(InvalidArgumentError);
    await locker.close();
  });
});

// Unprovoked, it is the locker it wraps: the whole contract holds.
lockerContract("FaultyLocker over MemoryLocker", async () => {
  const lockers: FaultyLocker[] = [];
  return {
    create: async () => {
      const locker = new FaultyLocker();
      lockers.push(locker);
      return locker;
    },
    peer: async (locker) => locker,
    fencing: true,
    cleanup: async () => {
      await Promise.all(lockers.map((locker) => locker.close()));
    },
  };
});
