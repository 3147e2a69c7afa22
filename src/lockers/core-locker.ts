import type { StoredHolder } from "../backend.js";
import type { AcquisitionOwner } from "../core/acquisition.js";
import { decodeHandOff } from "../core/hand-off-handle.js";
import type { CoreSettings, LockCore } from "../core/lock-core.js";
import type { LockerKind } from "../diagnostics.js";
// Referenced from doc comments only.
import type { LockerClosedError } from "../errors.js";
import { resolveListOptions, sortedByKey } from "../internal/list-options.js";
import { noopRelease } from "../internal/release-func.js";
import { type AcquireCall, type LockCall, TracedLocker } from "../internal/traced-locker.js";
import { checkWeight, DEFAULT_ACQUIRE_OPTIONS, type ResolvedAcquireOptions } from "../internal/validate.js";
import type {
  AdoptOptions,
  HolderInfo,
  Lease,
  LeaseKeeperStats,
  ListOptions,
  Locker,
  LockInfo,
  ReleaseFunc,
} from "../locker.js";

/**
 * A {@link Locker} over a {@link LockCore}: what every store's locker shares. A subclass says how
 * a call's options become a request to the core (its weight, and whether fencing is allowed).
 *
 * Every call is traced on the `globallock:acquire` channel while anyone listens (see
 * `diagnostics.ts`); otherwise it runs as it would without diagnostics.
 */
export abstract class CoreLocker<O extends CoreSettings = CoreSettings> extends TracedLocker implements Locker {
  readonly #core: LockCore<O>;
  /** Owns this locker's acquisitions; names it in diagnostics messages. */
  readonly #owner: AcquisitionOwner;

  /**
   * @param core the core (shared by the two views of a read-write locker).
   * @param kind what diagnostics messages call this locker.
   */
  protected constructor(core: LockCore<O>, kind: LockerKind) {
    super(kind);
    this.#core = core;
    this.#owner = core.ownerFor(this, kind);
  }

  /**
   * The request of a call that passed no options (shared by every such call).
   * @internal
   */
  protected readonly defaultRequest: ResolvedAcquireOptions = DEFAULT_ACQUIRE_OPTIONS;

  /**
   * Validates `options` (already resolved by the core) for this locker and returns the request
   * sent to the core: checks `weight` against the limit and refuses unsupported fencing. By
   * default a lock's: a weight of 1, fencing as the store allows.
   * @internal
   */
  protected request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    checkWeight(options.weight, 1, "a lock's limit is 1");
    return options;
  }

  /**
   * True while the store has work to finish before a call's first attempt (see {@link ready}); by
   * default never.
   * @internal
   */
  protected get unready(): boolean {
    return false;
  }

  /**
   * Finishes, while {@link unready}, what the store needs before a call's first attempt (the file
   * store makes its directory); rejects when the call is invalid. `lock` and `tryLock` calls pass
   * no options.
   * @internal
   */
  protected async ready(_call: AcquireCall): Promise<void> {}

  /** The resolved options (defaults filled in). */
  get options(): Readonly<Omit<O, "onLockLost">> {
    return this.#core.options;
  }

  /**
   * Number of leases this locker currently holds (and extends, unless `autoExtend: false`); for a
   * view of a read-write locker, both views' leases.
   */
  get heldCount(): number {
    return this.#core.heldCount;
  }

  /**
   * Number of callers waiting in `lock` or `acquire` on this locker: queued behind another caller
   * here, or waiting after a failed attempt (a call whose first attempt succeeds is never counted).
   * For a view of a read-write locker, both views' waiters.
   */
  get waitingCount(): number {
    return this.#core.waitingCount;
  }

  /**
   * What the lease keeper measured: extensions and extension commands sent, transient failures
   * retried, the least validity a lease had left when its extension was confirmed
   * (`minHeadroomMs`), and the latest its timer fired (`maxLatenessMs`).
   */
  get leaseStats(): LeaseKeeperStats {
    return this.#core.leaseStats;
  }

  /** {@inheritDoc Locker.adopt} */
  async adopt(signal: AbortSignal | undefined, handle: string, options?: AdoptOptions): Promise<Lease> {
    const content = decodeHandOff(handle);
    if (this.unready) await this.ready([signal, content.key, undefined, undefined]);
    return this.#core.adopt(signal, content, options, this.#owner, this.diagnostics.kind);
  }

  /** {@inheritDoc Locker.inspect} */
  async inspect(signal: AbortSignal | undefined, key: string): Promise<LockInfo> {
    if (this.unready) await this.ready([signal, key, undefined, undefined]);
    this.#core.checkCall(signal, key);
    const view = await this.#core.inspect(signal, key);
    const holders = view.holders.map((holder) => this.describeHolder(holder));
    return { key, holders, waiting: view.waiting };
  }

  /** {@inheritDoc Locker.list} */
  async list(signal: AbortSignal | undefined, options?: ListOptions): Promise<LockInfo[]> {
    const { prefix, limit } = resolveListOptions(signal, options);
    this.#core.checkList(signal);
    const listed = await this.#core.list(signal, prefix, limit);
    const infos = listed.map(({ key, view }) => ({
      key,
      holders: view.holders.map((holder) => this.describeHolder(holder)),
      waiting: view.waiting,
    }));
    return sortedByKey(infos).slice(0, limit);
  }

  /**
   * A holder as the caller counts it: by default a lock's (exclusive, its weight). A semaphore's
   * holders share the key; a read-write view tells a writer from a reader.
   * @internal
   */
  protected describeHolder(holder: StoredHolder): HolderInfo {
    return holderInfo(holder, "exclusive", holder.weight);
  }

  /**
   * Stops the locker: idempotent; stops auto-extension at once, refuses new calls, rejects waiters
   * with {@link LockerClosedError}, and resolves when nothing of the locker is running. Held leases
   * are neither deleted nor extended any more: they expire within their `expiry`. Their releases
   * still work (and still free the key while its token matches).
   */
  override close(): Promise<void> {
    return this.#core.close();
  }

  // The calls themselves (see TracedLocker); `probe` is the diagnostics message while traced.

  /**
   * Not an async function: a key taken at once resolves its promise with no await in between, and
   * a wait costs one reaction, as an `await` would.
   * @internal
   */
  protected override lockCall(signal: LockCall[0], key: LockCall[1], probe: LockCall[2]): Promise<ReleaseFunc> {
    if (this.unready) return this.#lockWhenReady(signal, key, probe);
    try {
      this.#core.checkCall(signal, key);
      const obtained = this.#core.obtainRelease({
        signal,
        key,
        request: this.defaultRequest,
        owner: this.#owner,
        probe,
      });
      return typeof obtained === "function" ? Promise.resolve(obtained) : obtained;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** {@link lockCall} once the store is {@link ready}. */
  async #lockWhenReady(signal: LockCall[0], key: LockCall[1], probe: LockCall[2]): Promise<ReleaseFunc> {
    await this.ready([signal, key, undefined, probe]);
    this.#core.checkCall(signal, key);
    const call = { signal, key, request: this.defaultRequest, owner: this.#owner, probe };
    return this.#core.obtainRelease(call);
  }

  /** @internal */
  protected override async tryLockCall(
    signal: LockCall[0],
    key: LockCall[1],
    probe: LockCall[2],
  ): Promise<[acquired: boolean, release: ReleaseFunc]> {
    if (this.unready) await this.ready([signal, key, undefined, probe]);
    this.#core.checkCall(signal, key);
    const call = { signal, key, request: this.defaultRequest, owner: this.#owner, probe };
    const acquisition = await this.#core.tryObtain(call);
    return acquisition === undefined ? [false, noopRelease()] : [true, acquisition.releaser.release];
  }

  /** @internal */
  protected async acquireCall(...call: AcquireCall): Promise<Lease> {
    if (this.unready) await this.ready(call);
    const [signal, key, , probe] = call;
    const request = this.#prepare(call);
    const acquisition = await this.#core.obtain({ signal, key, request, owner: this.#owner, probe });
    return this.#core.leaseOf(acquisition, request.weight);
  }

  /** @internal */
  protected async tryAcquireCall(...call: AcquireCall): Promise<Lease | undefined> {
    if (this.unready) await this.ready(call);
    const [signal, key, , probe] = call;
    const request = this.#prepare(call);
    const acquisition = await this.#core.tryObtain({ signal, key, request, owner: this.#owner, probe });
    return acquisition === undefined ? undefined : this.#core.leaseOf(acquisition, request.weight);
  }

  /**
   * Validates an acquire call (options first, then signal and key) before anything is sent; tells
   * `probe` the weight asked for (before a read-write view maps a writer's weight to all permits).
   */
  #prepare(call: AcquireCall): ResolvedAcquireOptions {
    const [signal, key, options, probe] = call;
    const resolved = this.#core.resolveRequest(options);
    const request = this.request(resolved);
    if (probe !== undefined) probe.weight = resolved.weight;
    this.#core.checkCall(signal, key);
    if (request.fencing) this.#core.checkFencing(key);
    return request;
  }
}

/** A {@link HolderInfo} of `holder`, in `mode`, holding `weight` permits as the caller counts them. */
export function holderInfo(holder: StoredHolder, mode: HolderInfo["mode"], weight: number): HolderInfo {
  const { owner, expiresInMs, fencingToken } = holder;
  return fencingToken === undefined
    ? { owner, mode, weight, expiresInMs }
    : { owner, mode, weight, expiresInMs, fencingToken };
}
