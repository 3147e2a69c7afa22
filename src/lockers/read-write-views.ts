import type { BackendFactory, StoredHolder } from "../backend.js";
import { type CoreSettings, LockCore } from "../core/lock-core.js";
import type { LockerStore } from "../diagnostics.js";
import { UnsupportedError } from "../errors.js";
import { checkWeight, DEFAULT_ACQUIRE_OPTIONS, type ResolvedAcquireOptions } from "../internal/validate.js";
import type { HolderInfo, Locker } from "../locker.js";
import type { ReadWriteLocker } from "../read-write.js";
import { CoreLocker, holderInfo } from "./core-locker.js";

/**
 * Permits of a read-write key on a store: a reader takes one, a writer all of them. (A billion
 * readers at once is beyond any real use; Lua numbers count them exactly.)
 */
export const READ_WRITE_PERMITS = 1_000_000_000;

/** What a read-write locker's views need to know of their store. */
export interface ReadWriteStore {
  /** The store's name in diagnostics kinds: `"<name>-read"` and `"<name>-write"`. */
  readonly name: LockerStore;
  /** Permits of a key: a reader takes one, a writer all of them. */
  readonly permits: number;
  /** The store's own checks of a request (before a writer's weight becomes all permits). */
  readonly adapt?: ((options: ResolvedAcquireOptions) => ResolvedAcquireOptions) | undefined;
  /** What a weight above 1 is told (default: a read or write lease takes one lock). */
  readonly weightNote?: string | undefined;
  /** The message of `fencing` on a read lease (default: use them on write leases). */
  readonly fencingRefusal?: string | undefined;
}

/** One view of a read-write locker: the readers' or the writers' {@link Locker}. */
export class ReadWriteView<O extends CoreSettings> extends CoreLocker<O> {
  /** @internal */
  protected override readonly defaultRequest: ResolvedAcquireOptions;
  readonly #writer: boolean;
  readonly #store: ReadWriteStore;

  /**
   * @param core the core both views share.
   * @param store the store's name, permits and checks.
   * @param writer true for the writers' view.
   */
  constructor(core: LockCore<O>, store: ReadWriteStore, writer: boolean) {
    super(core, `${store.name}-${writer ? "write" : "read"}`);
    this.#writer = writer;
    this.#store = store;
    this.defaultRequest = writer ? { ...DEFAULT_ACQUIRE_OPTIONS, weight: store.permits } : DEFAULT_ACQUIRE_OPTIONS;
  }

  /**
   * A writer (it holds every permit) is exclusive, a reader shared; either holds one lock.
   * @internal
   */
  protected override describeHolder(holder: StoredHolder): HolderInfo {
    return holderInfo(holder, holder.weight >= this.#store.permits ? "exclusive" : "shared", 1);
  }

  /** @internal */
  protected override request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    const store = this.#store;
    checkWeight(options.weight, 1, store.weightNote ?? "a read or write lease takes one lock");
    if (options.fencing && !this.#writer) {
      throw new UnsupportedError(
        store.fencingRefusal ?? "Fencing tokens need an exclusive grant: use them on write leases, not read leases",
      );
    }
    const request = store.adapt === undefined ? options : store.adapt(options);
    return this.#writer ? { ...request, weight: store.permits } : request;
  }
}

/**
 * A {@link ReadWriteLocker} over one {@link LockCore} whose backend counts permits: its two views,
 * its counts and its close. A store's read-write locker extends it with its constructor.
 */
export abstract class CoreReadWriteLocker<O extends CoreSettings = CoreSettings> implements ReadWriteLocker {
  /** Shared (read) leases: many at once, none while a writer holds the key. */
  readonly read: Locker;
  /** Exclusive (write) leases: one at a time, and no reader meanwhile. */
  readonly write: Locker;
  readonly #core: LockCore<O>;

  /**
   * @param settings the resolved options (the core's settings and what the store adds).
   * @param makeBackend makes the store's backend (counting `store.permits` per key).
   * @param store the store's name, permits and checks.
   */
  protected constructor(settings: O, makeBackend: BackendFactory, store: ReadWriteStore) {
    this.#core = new LockCore(settings, makeBackend, store.permits);
    this.read = new ReadWriteView(this.#core, store, false);
    this.write = new ReadWriteView(this.#core, store, true);
  }

  /**
   * The resolved options (defaults filled in).
   * @internal
   */
  protected get settings(): Readonly<Omit<O, "onLockLost">> {
    return this.#core.options;
  }

  /** Number of leases held now, read and write (not keys). */
  get heldCount(): number {
    return this.#core.heldCount;
  }

  /** Number of callers (readers and writers) waiting in `lock` or `acquire`, over all keys. */
  get waitingCount(): number {
    return this.#core.waitingCount;
  }

  /** Closes both views: see `Locker.close`. Idempotent. */
  close(): Promise<void> {
    return this.#core.close();
  }
}
