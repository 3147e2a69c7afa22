import { snapshotOptions } from "../internal/validate.js";
import type { Locker } from "../locker.js";
import type { ReadWriteLocker } from "../read-write.js";
// Referenced from doc comments only.
import type { MemoryLocker } from "./memory-locker.js";
import { PermitLocker, PermitStore } from "./permits.js";

/**
 * Options of {@link MemoryReadWriteLocker}. There are none yet; the bag is reserved for the
 * future: pass `undefined` or `{}` (any key is an `InvalidArgumentError`).
 */
export type MemoryReadWriteLockerOptions = Record<string, never>;

/**
 * Permits of a key: a reader takes one, a writer takes them all, so a writer fits only when no
 * one holds the key and readers are (practically) unlimited.
 */
const ALL_PERMITS = Number.MAX_SAFE_INTEGER;

/**
 * An in-process {@link ReadWriteLocker}: per key, many readers at once or one writer, served in
 * arrival order from one queue per key (see {@link ReadWriteLocker} for the rules).
 *
 * Built as one weighted FIFO semaphore per key whose limit nobody reaches: a reader weighs 1, a
 * writer weighs the whole limit. Leases never expire unless acquired with
 * `{ autoExtend: false, expiry }` (then they are freed at expiry, as with {@link MemoryLocker}).
 */
export class MemoryReadWriteLocker implements ReadWriteLocker {
  /** {@inheritDoc ReadWriteLocker.read} */
  readonly read: Locker;
  /** {@inheritDoc ReadWriteLocker.write} */
  readonly write: Locker;
  readonly #store = new PermitStore(ALL_PERMITS);

  /** Creates an empty read-write locker. `options` is reserved: undefined or an empty object. */
  constructor(options?: MemoryReadWriteLockerOptions) {
    snapshotOptions("options", options, []);
    const store = this.#store;
    const closing = new AbortController();
    const view = { store, closing, maxWeight: 1, maxWeightReason: "each view's limit is 1" };
    this.read = new PermitLocker({
      ...view,
      kind: "memory-read",
      permits: () => 1,
      unfenced:
        "Fencing tokens need an exclusive grant: read leases are shared, so no token can order their holders; " +
        "fence the write view",
    });
    this.write = new PermitLocker({ ...view, kind: "memory-write", permits: () => ALL_PERMITS, unfenced: undefined });
  }

  /** Number of keys read or written now. */
  get heldCount(): number {
    return this.#store.heldCount;
  }

  /** Number of callers (readers and writers) waiting in `lock` or `acquire`, over all keys. */
  get waitingCount(): number {
    return this.#store.waitingCount;
  }

  /** {@inheritDoc ReadWriteLocker.close} */
  close(): Promise<void> {
    return this.write.close();
  }
}
