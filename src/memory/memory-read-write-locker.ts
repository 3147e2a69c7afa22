import type { CoreSettings } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkMemory } from "../deployment/memory.js";
import { snapshotOptions } from "../internal/validate.js";
import { CoreReadWriteLocker, type ReadWriteStore } from "../lockers/read-write-views.js";
import type { ReadWriteLocker } from "../read-write.js";
import { type MemoryOptions, memoryBackend, memoryRequest, memorySettings } from "./memory-backend.js";
// Referenced from doc comments only.
import type { MemoryLocker } from "./memory-locker.js";

/** Options of {@link MemoryReadWriteLocker} (any other key is an `InvalidArgumentError`). */
export type MemoryReadWriteLockerOptions = MemoryOptions;

/**
 * Permits of a key: a reader takes one, a writer takes them all, so a writer fits only when no
 * one holds the key and readers are (practically) unlimited.
 */
const ALL_PERMITS = Number.MAX_SAFE_INTEGER;

/** The in-process read-write views: leases held by the process (see `memoryRequest`). */
const MEMORY: ReadWriteStore = {
  name: "memory",
  permits: ALL_PERMITS,
  adapt: memoryRequest,
  weightNote: "each view's limit is 1",
  fencingRefusal:
    "Fencing tokens need an exclusive grant: read leases are shared, so no token can order their holders; " +
    "fence the write view",
};

/**
 * An in-process {@link ReadWriteLocker}: per key, many readers at once or one writer, served in
 * arrival order from one queue per key (see {@link ReadWriteLocker} for the rules).
 *
 * Built as one weighted FIFO semaphore per key whose limit nobody reaches: a reader weighs 1, a
 * writer weighs the whole limit. Leases never expire unless acquired with
 * `{ autoExtend: false, expiry }` (then they are freed at expiry, as with {@link MemoryLocker}).
 * Closing either view closes both.
 */
export class MemoryReadWriteLocker extends CoreReadWriteLocker<CoreSettings> {
  /** Creates an empty read-write locker. `options` is reserved: undefined or an empty object. */
  constructor(options?: MemoryReadWriteLockerOptions) {
    const { owner } = snapshotOptions("options", options, ["owner"]);
    super(memorySettings(owner), memoryBackend(ALL_PERMITS), MEMORY);
    attachDeploymentCheck([this, this.read, this.write], checkMemory);
  }
}
