import type { CoreSettings } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkMemory } from "../deployment/memory.js";
import { InvalidArgumentError } from "../errors.js";
import { type OptionResolvers, type ResolvedAcquireOptions, resolveEachOption } from "../internal/validate.js";
import { CoreSemaphore } from "../lockers/core-semaphore.js";
import { type MemoryOptions, memoryBackend, memoryRequest, memorySettings } from "./memory-backend.js";

/** Options of {@link MemorySemaphore}. */
export interface MemorySemaphoreOptions extends MemoryOptions {
  /** Permits of each key that may be held at once: a positive safe integer (1 makes it a lock). */
  limit: number;
}

const SEMAPHORE_OPTIONS: OptionResolvers<MemorySemaphoreOptions> = {
  limit: (value, argument) => {
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
      throw new InvalidArgumentError(argument, "a safe integer >= 1 (permits per key)", value);
    }
    return value;
  },
  owner: (value) => memorySettings(value).owner as string,
};

/**
 * An in-process counting semaphore, a {@link Locker}: at most `limit` permits of each key are
 * held at once. Each acquisition takes `weight` permits (option of {@link Locker.acquire}; default
 * 1, at most `limit`); `lock` and `tryLock` take one. With `limit: 1` it is a lock and passes the
 * lock contract, fencing tokens included.
 *
 * - **Strict arrival order per key.** A caller whose weight does not fit waits, and callers who
 *   arrive after it wait behind it even when they would fit, so a heavy caller is never overtaken
 *   forever by light ones. A release admits queued callers from the head for as long as they fit.
 *   `tryLock`/`tryAcquire` fail while anyone is queued: they never jump the queue.
 * - **Wake on release**, with no timer on the path; an aborted waiter leaves the queue at once
 *   (and may let the callers behind it in). `close()` rejects waiters; releases keep working.
 * - **Leases** never expire (the semaphore lives in its process) unless acquired with
 *   `{ autoExtend: false, expiry }`: then the permits come back `expiry` ms after the grant unless
 *   released first, and the lease's `lost` aborts with reason `"expired"`.
 * - **Fencing** needs an exclusive grant: with `limit > 1`, `{ fencing: true }` is an
 *   {@link UnsupportedError} (thrown before anything is taken).
 * - `heldCount` is the number of leases held (not keys), `waitingCount` the callers waiting.
 */
export class MemorySemaphore extends CoreSemaphore<CoreSettings> {
  /**
   * Creates an empty semaphore. `limit` must be a positive safe integer; a missing or bad limit,
   * or an unknown option, is an {@link InvalidArgumentError} naming the value.
   */
  constructor(options: MemorySemaphoreOptions) {
    const { limit, owner } = resolveEachOption("options", options, SEMAPHORE_OPTIONS);
    super(memorySettings(owner), memoryBackend(limit), limit, "memory-semaphore");
    attachDeploymentCheck([this], checkMemory);
  }

  /** @internal */
  protected fencingRefusal(): string {
    return (
      `Fencing tokens need an exclusive grant: this semaphore lets up to ${this.limit} holders in at once (limit ${this.limit}), ` +
      "so no token can order their writes; use a lock or a semaphore with limit 1"
    );
  }

  /** @internal */
  protected override request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    return memoryRequest(super.request(options));
  }
}
