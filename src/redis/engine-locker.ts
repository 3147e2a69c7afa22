import { noopRelease } from "../internal/release-func.js";
// Referenced from doc comments only.
import type { LockerClosedError } from "../errors.js";
import type { ResolvedAcquireOptions } from "../internal/validate.js";
import type { AcquireOptions, Lease, Locker, ReleaseFunc } from "../locker.js";
import type { LeaseKeeperStats } from "./lease-keeper.js";
import type { LockEngine } from "./lock-engine.js";
import type { ResolvedRedisLockerOptions } from "./options.js";

/**
 * A {@link Locker} over a {@link LockEngine}: what every Redis locker shares. A subclass says how
 * a call's options become a request to the engine (its weight, and whether fencing is allowed).
 */
export abstract class EngineLocker implements Locker {
  readonly #engine: LockEngine;

  protected constructor(engine: LockEngine) {
    this.#engine = engine;
  }

  /**
   * The request of a call that passed no options (shared by every such call).
   * @internal
   */
  protected abstract readonly defaultRequest: ResolvedAcquireOptions;

  /**
   * Validates `options` (already resolved by the engine) for this locker and returns the request
   * sent to the engine: checks `weight` against the limit and refuses unsupported fencing.
   * @internal
   */
  protected abstract request(options: ResolvedAcquireOptions): ResolvedAcquireOptions;

  /** The resolved options (defaults filled in). */
  get options(): Readonly<Omit<ResolvedRedisLockerOptions, "onLockLost">> {
    return this.#engine.options;
  }

  /** Number of leases this locker currently holds (and extends, unless `autoExtend: false`). */
  get heldCount(): number {
    return this.#engine.heldCount;
  }

  /**
   * What the lease keeper measured: extensions and extension commands sent, transient failures
   * retried, the least validity a lease had left when its extension was confirmed
   * (`minHeadroomMs`), and the latest its timer fired (`maxLatenessMs`).
   */
  get leaseStats(): LeaseKeeperStats {
    return this.#engine.leaseStats;
  }

  /** {@inheritDoc Locker.lock} */
  async lock(signal: AbortSignal | undefined, key: string): Promise<ReleaseFunc> {
    this.#engine.checkCall(signal, key);
    return (await this.#engine.obtain(signal, key, this.defaultRequest)).releaser.release;
  }

  /** {@inheritDoc Locker.tryLock} */
  async tryLock(signal: AbortSignal | undefined, key: string): Promise<[acquired: boolean, release: ReleaseFunc]> {
    this.#engine.checkCall(signal, key);
    const acquisition = await this.#engine.tryObtain(signal, key, this.defaultRequest);
    return acquisition === undefined ? [false, noopRelease()] : [true, acquisition.releaser.release];
  }

  /** {@inheritDoc Locker.acquire} */
  async acquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease> {
    const request = this.#prepare(signal, key, options);
    return this.#engine.leaseOf(await this.#engine.obtain(signal, key, request));
  }

  /** {@inheritDoc Locker.tryAcquire} */
  async tryAcquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease | undefined> {
    const request = this.#prepare(signal, key, options);
    const acquisition = await this.#engine.tryObtain(signal, key, request);
    return acquisition === undefined ? undefined : this.#engine.leaseOf(acquisition);
  }

  /**
   * Stops the locker: idempotent; stops auto-extension at once, refuses new calls, rejects waiters
   * with {@link LockerClosedError}, and resolves when nothing of the locker is running. Held leases
   * are neither deleted nor extended any more: they expire within their `expiry`. Their releases
   * still work (and still free the key while its token matches).
   */
  close(): Promise<void> {
    return this.#engine.close();
  }

  /** Validates an acquire call (options first, then signal and key) before anything is sent. */
  #prepare(signal: AbortSignal | undefined, key: string, options: AcquireOptions | undefined): ResolvedAcquireOptions {
    const request = this.request(this.#engine.resolveRequest(options));
    this.#engine.checkCall(signal, key);
    if (request.fencing) this.#engine.checkFencing(key);
    return request;
  }
}
