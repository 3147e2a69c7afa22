/**
 * The shared contract suites against PostgresReadWriteLocker on one real PostgreSQL server: the
 * read-write contract, and the lock contract on its write view. Each locker has its own pool, like
 * a separate process.
 */
import { type PostgresLockerOptions, PostgresReadWriteLocker } from "../src/index.js";
import { type LockerHarness, lockerContract } from "./contract.js";
import { PostgresFixture } from "./helpers/postgres-harness.js";
import { type ReadWriteHarness, readWriteContract } from "./read-write-contract.js";

/** Read-write lockers on a PostgreSQL server of their own (stopped by `cleanup`). */
async function readWriteLockers(): Promise<{
  create(options?: { wakeOnly?: boolean }): PostgresReadWriteLocker;
  cleanup(): Promise<void>;
}> {
  const fixture = await PostgresFixture.start();
  const made: PostgresReadWriteLocker[] = [];
  return {
    create(options) {
      const given: PostgresLockerOptions = options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};
      const rw = new PostgresReadWriteLocker(fixture.pool(), given);
      made.push(rw);
      return rw;
    },
    async cleanup() {
      await Promise.allSettled(made.map((rw) => rw.close()));
      await fixture.stop();
    },
  };
}

readWriteContract("PostgresReadWriteLocker", async (): Promise<ReadWriteHarness> => {
  const lockers = await readWriteLockers();
  return {
    create: async (options) => lockers.create(options),
    peer: async (_rw, options) => lockers.create(options),
    fencing: true,
    cleanup: () => lockers.cleanup(),
  };
});

lockerContract("PostgresReadWriteLocker write view", async (): Promise<LockerHarness> => {
  const lockers = await readWriteLockers();
  return {
    create: async (options) => lockers.create(options).write,
    peer: async (_locker, options) => lockers.create(options).write,
    fencing: true,
    cleanup: () => lockers.cleanup(),
  };
});
