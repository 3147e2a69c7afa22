import { MemoryLocker } from "../../src/index.js";
import { memoryLockerHarness } from "../helpers/memory-harness.js";
import { lockAllSuite } from "./lock-all-contract.js";

/** The suite lives in lock-all-contract.ts (importing a test file would run its suites again). */
export { lockAllSuite } from "./lock-all-contract.js";

lockAllSuite(
  "MemoryLocker",
  memoryLockerHarness(() => new MemoryLocker()),
);
