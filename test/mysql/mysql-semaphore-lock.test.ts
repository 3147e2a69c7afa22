/**
 * MySqlSemaphore with `limit: 1` is a lock: the lock contract on one real MariaDB server
 * (each semaphore on a pool of its own, like a separate process).
 */
import { MySqlSemaphore } from "../../src/mysql/mysql-semaphore.js";
import { lockerContract } from "../contracts/contract.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";

/** A safety net so slow that only a probe wakes a waiter in time. */
const wakeOnly = (options?: { wakeOnly?: boolean }) =>
  options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};

lockerContract("MySqlSemaphore { limit: 1 }", async () => {
  const fixture = await MySqlFixture.start();
  const made: MySqlSemaphore[] = [];
  const make = (options?: { wakeOnly?: boolean }): MySqlSemaphore => {
    const semaphore = new MySqlSemaphore(fixture.pool(), { limit: 1, ...wakeOnly(options) });
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
