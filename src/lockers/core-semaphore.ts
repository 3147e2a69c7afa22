import type { BackendFactory, StoredHolder } from "../backend.js";
import { type CoreSettings, LockCore } from "../core/lock-core.js";
import type { LockerKind } from "../diagnostics.js";
import { UnsupportedError } from "../errors.js";
import { checkWeight, type ResolvedAcquireOptions } from "../internal/validate.js";
import type { HolderInfo } from "../locker.js";
import { CoreLocker, holderInfo } from "./core-locker.js";

/**
 * A counting semaphore over a {@link LockCore} whose backend counts permits: `weight` from 1 to
 * `limit` per acquisition, and fencing only when `limit` is 1 (tokens order exclusive grants). A
 * store's semaphore extends it with its constructor and its refusal of fencing.
 */
export abstract class CoreSemaphore<O extends CoreSettings> extends CoreLocker<O> {
  /** Permits of each key that may be held at once. */
  readonly limit: number;

  /**
   * @param settings the resolved options (the core's settings and what the store adds).
   * @param makeBackend makes the store's backend (counting `limit` permits per key).
   * @param limit permits of each key.
   * @param kind what diagnostics messages call this semaphore.
   */
  protected constructor(settings: O, makeBackend: BackendFactory, limit: number, kind: LockerKind) {
    super(new LockCore(settings, makeBackend, limit), kind);
    this.limit = limit;
  }

  /**
   * The message of `fencing: true` on this semaphore while `limit` is above 1.
   * @internal
   */
  protected abstract fencingRefusal(): string;

  /**
   * A holder of a semaphore shares the key with others, unless it holds every permit.
   * @internal
   */
  protected override describeHolder(holder: StoredHolder): HolderInfo {
    return holderInfo(holder, holder.weight >= this.limit ? "exclusive" : "shared", holder.weight);
  }

  /** @internal */
  protected override request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    checkWeight(options.weight, this.limit, `the semaphore's limit is ${this.limit}`);
    if (options.fencing && this.limit > 1) throw new UnsupportedError(this.fencingRefusal());
    return options;
  }
}
