/**
 * PostgresSemaphore with `limit: 1` is a lock: the lock contract on one real PostgreSQL server
 * (each semaphore on a pool of its own, like a separate process).
 */
import { PostgresSemaphore } from "../../src/postgres/postgres-semaphore.js";
import { lockerContract } from "../contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";

/** A safety net so slow that only a NOTIFY wakes a waiter in time. */
const wakeOnly = (options?: { wakeOnly?: boolean }) =>
  options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};

lockerContract("PostgresSemaphore { limit: 1 }", async () => {
  const fixture = await PostgresFixture.start();
  const made: PostgresSemaphore[] = [];
  const make = (options?: { wakeOnly?: boolean }): PostgresSemaphore => {
    const semaphore = new PostgresSemaphore(fixture.pool(), { limit: 1, ...wakeOnly(options) });
    made.push(semaphore);
    return semaphore;
  };
  return {
    create: async (options) => make(options),
    peer: async (_locker, options) => make(options),
    fencing: true,
    cleanup: async () => {
      await Promise.allSettled(made.map((semaphore) => semaphore.close()));
      await fixture.stop();
    },
  };
});
