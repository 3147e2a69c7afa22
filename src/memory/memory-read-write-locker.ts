import { CoreLocker } from "../core/core-locker.js";
import { type CoreSettings, LockCore } from "../core/lock-core.js";
import { UnsupportedError } from "../errors.js";
import {
  checkWeight,
  DEFAULT_ACQUIRE_OPTIONS,
  type ResolvedAcquireOptions,
  snapshotOptions,
} from "../internal/validate.js";
import type { Locker } from "../locker.js";
import type { ReadWriteLocker } from "../read-write.js";
import { MEMORY_SETTINGS, memoryBackend, memoryRequest } from "./memory-backend.js";
// Referenced from doc comments only.
import type { MemoryLocker } from "./memory-locker.js";

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

/** One view of a {@link MemoryReadWriteLocker}: the readers' or the writers' {@link Locker}. */
class ReadWriteView extends CoreLocker<CoreSettings> {
  protected readonly defaultRequest: ResolvedAcquireOptions;
  readonly #writer: boolean;

  constructor(engine: LockCore, writer: boolean) {
    super(engine, writer ? "memory-write" : "memory-read");
    this.#writer = writer;
    this.defaultRequest = writer ? { ...DEFAULT_ACQUIRE_OPTIONS, weight: ALL_PERMITS } : DEFAULT_ACQUIRE_OPTIONS;
  }

  protected request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    checkWeight(options.weight, 1, "each view's limit is 1");
    if (options.fencing && !this.#writer) {
      throw new UnsupportedError(
        "Fencing tokens need an exclusive grant: read leases are shared, so no token can order their holders; " +
          "fence the write view",
      );
    }
    const request = memoryRequest(options);
    return this.#writer ? { ...request, weight: ALL_PERMITS } : request;
  }
}

/**
 * An in-process {@link ReadWriteLocker}: per key, many readers at once or one writer, served in
 * arrival order from one queue per key (see {@link ReadWriteLocker} for the rules).
 *
 * Built as one weighted FIFO semaphore per key whose limit nobody reaches: a reader weighs 1, a
 * writer weighs the whole limit. Leases never expire unless acquired with
 * `{ autoExtend: false, expiry }` (then they are freed at expiry, as with {@link MemoryLocker}).
 * Closing either view closes both.
 */
export class MemoryReadWriteLocker implements ReadWriteLocker {
  /** {@inheritDoc ReadWriteLocker.read} */
  readonly read: Locker;
  /** {@inheritDoc ReadWriteLocker.write} */
  readonly write: Locker;
  readonly #engine: LockCore;

  /** Creates an empty read-write locker. `options` is reserved: undefined or an empty object. */
  constructor(options?: MemoryReadWriteLockerOptions) {
    snapshotOptions("options", options, []);
    this.#engine = new LockCore(MEMORY_SETTINGS, memoryBackend(ALL_PERMITS), ALL_PERMITS);
    this.read = new ReadWriteView(this.#engine, false);
    this.write = new ReadWriteView(this.#engine, true);
  }

  /** Number of leases held now, read and write (not keys). */
  get heldCount(): number {
    return this.#engine.heldCount;
  }

  /** Number of callers (readers and writers) waiting in `lock` or `acquire`, over all keys. */
  get waitingCount(): number {
    return this.#engine.waitingCount;
  }

  /** {@inheritDoc ReadWriteLocker.close} */
  close(): Promise<void> {
    return this.#engine.close();
  }
}
