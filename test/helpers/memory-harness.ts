import type { Locker } from "../../src/index.js";
import type { LockerHarness } from "../contracts/contract.js";

/**
 * The parts of a contract harness for in-memory primitives: `create` makes a new one with `make`,
 * `peer` returns the same instance (a memory store is its instance), `cleanup` closes all made.
 */
export function sameInstanceHarness<T extends { close(): Promise<void> }, O = unknown>(make: (options: O) => T) {
  const made: T[] = [];
  return {
    create: async (options: O): Promise<T> => {
      const item = make(options);
      made.push(item);
      return item;
    },
    peer: async (item: T): Promise<T> => item,
    cleanup: async (): Promise<void> => {
      await Promise.all(made.map((item) => item.close()));
    },
  };
}

/** The lock contract harness of an in-memory Locker made by `make` (fencing supported). */
export function memoryLockerHarness(make: () => Locker): () => Promise<LockerHarness> {
  return async () => ({ ...sameInstanceHarness<Locker>(make), fencing: true });
}
