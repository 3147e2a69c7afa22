/**
 * FileLocker under a burst: 10,000 concurrent attempts from 4 lockers on one key fill libuv's
 * thread pool with file operations unless they are bounded; the winner's extensions must still get
 * through (they go before waiting attempts), so the winner keeps its lease for the whole burst.
 */
import { rmSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { OperationQueue } from "../../src/file/operation-queue.js";
import { FileLocker, type Lease, type LockLostError } from "../../src/index.js";
import { tempLockDirectory } from "../helpers/file-harness.js";

const CALLS = 10_000;
const LOCKERS = 4;
/** Short enough that a burst that starves extensions loses the lease. */
const EXPIRY = 2000;

describe("FileLocker under a burst", () => {
  it(`${CALLS} concurrent tryAcquire from ${LOCKERS} lockers on one key: one winner, which keeps its lease`, async () => {
    const directory = tempLockDirectory("burst");
    const lost: LockLostError[] = [];
    const lockers = Array.from(
      { length: LOCKERS },
      () => new FileLocker({ directory, expiry: EXPIRY, onLockLost: (error) => lost.push(error) }),
    );
    try {
      const startedAt = performance.now();
      const results = await Promise.allSettled(
        Array.from({ length: CALLS }, (_, i) => (lockers[i % LOCKERS] as FileLocker).tryAcquire(undefined, "burst")),
      );
      const elapsed = Math.round(performance.now() - startedAt);
      const errors = results.flatMap((result) => (result.status === "rejected" ? [String(result.reason)] : []));
      const winners = results.flatMap((result) =>
        result.status === "fulfilled" && result.value !== undefined ? [result.value as Lease] : [],
      );
      console.log(
        `burst: ${CALLS} calls in ${elapsed} ms (expiry ${EXPIRY} ms): ${winners.length} winner(s), ` +
          `${lost.length} lost lease(s) (${lost.map((error) => error.reason).join(", ")}), ${errors.length} error(s)`,
      );
      expect(errors).toEqual([]);
      expect(lost.map((error) => error.reason)).toEqual([]);
      expect(winners).toHaveLength(1);
      const [lease] = winners as [Lease];
      lease.assertHeld();
      expect(await lease.releaseWithOutcome()).toBe("released");
    } finally {
      await Promise.all(lockers.map((locker) => locker.close()));
      rmSync(directory, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("OperationQueue (the store's bound on operations in flight)", () => {
  it("runs at most `limit` at once; urgent operations go before waiting ones, each class in order", async () => {
    const queue = new OperationQueue(1);
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const op = (name: string) => async (): Promise<string> => {
      running += 1;
      most = Math.max(most, running);
      await new Promise((resolve) => setImmediate(resolve));
      order.push(name);
      running -= 1;
      return name;
    };
    const done = [
      queue.run(false, op("first")),
      queue.run(false, op("attempt 1")),
      queue.run(false, op("attempt 2")),
      queue.run(true, op("extension 1")),
      queue.run(true, op("extension 2")),
    ];
    expect(queue.queued).toBe(4);
    expect(await Promise.all(done)).toEqual(["first", "attempt 1", "attempt 2", "extension 1", "extension 2"]);
    expect(order).toEqual(["first", "extension 1", "extension 2", "attempt 1", "attempt 2"]);
    expect(most).toBe(1);
    await expect(queue.run(true, () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await queue.run(false, op("after an error"))).toBe("after an error");
  });
});
