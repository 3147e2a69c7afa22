import { type CoreSettings, LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkMemory } from "../deployment/memory.js";
import { type ResolvedAcquireOptions, snapshotOptions } from "../internal/validate.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { type MemoryOptions, memoryBackend, memoryRequest, memorySettings } from "./memory-backend.js";

/** Options of {@link MemoryLocker} (any other key is an `InvalidArgumentError`). */
export type MemoryLockerOptions = MemoryOptions;

/**
 * An in-process {@link Locker}: mutual exclusion between callers of one Node.js process.
 *
 * Waiting keeps the shape of Gitea's memory locker (a wait that can be given up at any time) but
 * not its 100 ms polling: a release hands the key straight to the longest-waiting caller (FIFO),
 * with no timer on the path. An aborted waiter leaves the queue at once and leaves nothing behind.
 *
 * A lock is held by its process and never expires, so `expiry` alone changes nothing (and nothing
 * is extended). With `{ autoExtend: false, expiry }` the lock is freed `expiry` ms after the grant
 * unless released first: the next waiter gets it, the lease's `lost` aborts with reason
 * `"expired"`, and a later release reports `"expired"`. Fencing tokens rise with every grant.
 *
 * `heldCount` is the number of leases held (as on every locker), `waitingCount` the callers
 * waiting in `lock` or `acquire`.
 */
export class MemoryLocker extends CoreLocker<CoreSettings> {
  /** Creates an empty locker. */
  constructor(options?: MemoryLockerOptions) {
    const { owner } = snapshotOptions("options", options, ["owner"]);
    super(new LockCore(memorySettings(owner), memoryBackend(1)), "memory-lock");
    attachDeploymentCheck([this], checkMemory);
  }

  /** @internal */
  protected override request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    return memoryRequest(super.request(options));
  }
}
