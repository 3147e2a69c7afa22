import { type Locker, MemoryLocker } from "../src/index.js";
import { lockAllSuite } from "./lock-all-contract.js";

/** The suite lives in lock-all-contract.ts (importing a test file would run its suites again). */
export { lockAllSuite } from "./lock-all-contract.js";

lockAllSuite("MemoryLocker", async () => {
  const lockers: Locker[] = [];
  return {
    async create() {
      const locker = new MemoryLocker();
      lockers.push(locker);
      return locker;
    },
    async peer(locker) {
      return locker;
    },
    fencing: true,
    async cleanup() {
      await Promise.all(lockers.map((l) => l.close()));
    },
  };
});
