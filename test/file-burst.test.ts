/**
 * FileLocker under a burst: 10,000 concurrent attempts from 4 lockers on one key fill libuv's
 * thread pool with file operations unless they are bounded; the winner's extensions must still get
 * through (they go before waiting attempts), so the winner keeps its lease for the whole burst.
 */
import { rmSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { FileLocker, type Lease, type LockLostError } from "../src/index.js";
import { tempLockDirectory } from "./helpers/file-harness.js";

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
