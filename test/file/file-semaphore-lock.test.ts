/**
 * FileSemaphore with `limit: 1` is a lock: the lock contract (peers: other semaphores on the same
 * directory, in this process; the semaphore contract's peers are in child processes).
 */
import { rmSync } from "node:fs";
import { FileSemaphore } from "../../src/file/file-semaphore.js";
import { lockerContract } from "../contracts/contract.js";
import { tempLockDirectory } from "../helpers/file-harness.js";

lockerContract("FileSemaphore { limit: 1 }", async () => {
  const directory = tempLockDirectory("sem1");
  const made: FileSemaphore[] = [];
  const make = (options?: { wakeOnly?: boolean }): FileSemaphore => {
    // wakeOnly: a safety net so slow that only an event in the directory wakes a waiter in time.
    const slow = options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};
    const semaphore = new FileSemaphore({ directory, limit: 1, ...slow });
    made.push(semaphore);
    return semaphore;
  };
  return {
    create: async (o) => make(o),
    peer: async (_l, o) => make(o),
    fencing: true,
    handOff: true,
    cleanup: async () => {
      await Promise.all(made.map((semaphore) => semaphore.close()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
});
