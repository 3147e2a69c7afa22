import type { BackendFactory } from "../backend.js";
import type { CoreSettings } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import type { Finding } from "../deployment/finding.js";
import type { LockerKind } from "../diagnostics.js";
import { CoreSemaphore } from "../lockers/core-semaphore.js";
import { semaphoreFencingRefusal, semaphoreOptions } from "./semaphore-options.js";

/** What a session-lock store's semaphore is made of (see {@link SessionSemaphore}). */
export interface SessionSemaphoreStore<Pool, Resolved extends CoreSettings> {
  /** What diagnostics messages call the semaphore. */
  readonly kind: LockerKind;
  /** The largest `limit`. */
  readonly most: number;
  /** The default `prefix`. */
  readonly prefix: string;
  /** Checks the pool argument; throws InvalidArgumentError. */
  checkPool(pool: unknown): void;
  /** Validates the locker's options (all but `limit`) and fills in the defaults. */
  resolve(options: unknown): Resolved;
  /** Makes the store's semaphore backend, counting `limit` permits per key. */
  backend(pool: Pool, resolved: Resolved, limit: number): BackendFactory;
  /** The store's deployment check (see `checkDeployment`). */
  check(pool: Pool): Promise<Finding[]>;
}

/**
 * A semaphore on a session-lock store (PostgreSQL's, MySQL's): made as the store's locker is, on
 * the caller's pool, with a `limit` of permits per key up to the store's largest; fencing only
 * while `limit` is 1.
 */
export abstract class SessionSemaphore<Pool, Resolved extends CoreSettings> extends CoreSemaphore<Resolved> {
  /**
   * @param pool the caller's pool, checked first.
   * @param options the locker's options and `limit`.
   * @param store how the store makes its semaphore.
   */
  protected constructor(pool: Pool, options: unknown, store: SessionSemaphoreStore<Pool, Resolved>) {
    store.checkPool(pool);
    const { limit, given } = semaphoreOptions(options, store.most, store.prefix);
    const resolved = store.resolve(given);
    super(resolved, store.backend(pool, resolved, limit), limit, store.kind);
    attachDeploymentCheck([this], () => store.check(pool));
  }

  /** @internal */
  protected fencingRefusal(): string {
    return semaphoreFencingRefusal(this.limit);
  }
}
