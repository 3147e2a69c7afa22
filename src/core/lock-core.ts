import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { BackendFactory, ListedResource, StoredView } from "../backend.js";
import type { LockerKind } from "../diagnostics.js";
import { UnsupportedError } from "../errors.js";
import { subscribeAbort } from "../internal/abortable.js";
import { LeaseImpl } from "../internal/lease.js";
import {
  checkCall,
  checkMaxHold,
  type ResolvedAcquireOptions,
  resolveAcquireOptions,
  resolveAdoptOptions,
} from "../internal/validate.js";
import { KeyStates } from "../internal/waiter.js";
import type { AcquireOptions, AdoptOptions, Lease, LeaseKeeperStats, Locker, ReleaseFunc } from "../locker.js";
import { Acquisition, type AcquisitionOwner, AcquisitionTerms } from "./acquisition.js";
import { Attempts } from "./attempts.js";
import type { AcquireCall, CoreParts, CoreSettings } from "./core-parts.js";
import { DirectWaiter } from "./direct-waiter.js";
import type { HandOffContent } from "./hand-off-handle.js";
import { Holdings } from "./holdings.js";
import { LeaseTransfer } from "./lease-transfer.js";
import { Lifetime } from "./lifetime.js";
import { Store } from "./store.js";
import { WaitLoop } from "./wait-loop.js";

export type { CoreSettings } from "./core-parts.js";

/**
 * The one lock core: everything a lock does that is not the store, for every locker — lock,
 * semaphore and read-write views alike — over a {@link Backend} (see docs/architecture.md). It
 * wires its parts together and answers the public lockers:
 *
 * - {@link WaitLoop}: the per-key FIFO of waiters and how they wait; {@link Attempts}: one attempt,
 *   and the clean-up of one its caller abandoned; {@link GrantDesk}: grants a store's queue makes.
 * - {@link Holdings}: the leases held — registration, release, and (its {@link LeaseKeeper})
 *   extension from each lease's own validity and loss reporting; a holder whose lease is lost
 *   keeps running. {@link LeaseTransfer}: a lease handed to another process.
 * - {@link Lifetime}: `close()` stops extension, rejects waiters, and resolves once no store
 *   operation of the locker is in flight; it never closes the caller's clients.
 */
export class LockCore<O extends CoreSettings = CoreSettings> {
  readonly #options: O;
  readonly #store: Store;
  /** Per key: how many acquisitions are held here, and who waits here (FIFO). */
  readonly #keys = new KeyStates();
  readonly #lifetime = new Lifetime();
  readonly #holdings: Holdings;
  readonly #attempts: Attempts;
  readonly #transfer: LeaseTransfer;
  readonly #loop: WaitLoop;
  /** Counted locks (semaphores, read-write locks): every waiter has its own queue entry. */
  readonly #counted: boolean;
  #closed: Promise<void> | undefined;

  /**
   * @param options validated options (the core's settings and whatever the store adds).
   * @param makeBackend makes the store's backend, given this locker's waiter id and event sink.
   * @param limit permits per key for counted locks (semaphores, read-write locks); `undefined` for locks.
   */
  constructor(options: O, makeBackend: BackendFactory, limit?: number) {
    const keys = this.#keys;
    const lifetime = this.#lifetime;
    // Keeps the close signal's abort hub (and its one listener) for the core's life: otherwise a
    // lone waiter would add and remove an event listener at every wait (a grant's hot path). It
    // rejects the waiters of a store in this process, which do not subscribe one by one.
    subscribeAbort(lifetime.closing, (reason) => DirectWaiter.closeAll(keys, reason));
    this.#options = options;
    const counted = limit !== undefined;
    this.#counted = counted;
    const waiterId = randomBytes(8).toString("hex");
    const backend = makeBackend({
      waiterId,
      owner: options.owner ?? defaultOwner(),
      events: {
        released: (key) => {
          // Counted: every waiter of the key competes (permits held here may leave room). A lock:
          // while this locker holds the key, the message is stale (or our own).
          if (counted) keys.notifyAll(key);
          else if (keys.heldCount(key) === 0) keys.notifyHead(key);
        },
        granted: (key, grant) => this.#loop.grants.onGrant(key, grant),
        missed: () => keys.notifyAllHeads(),
        lost: (tokens, reason, cause) => this.#holdings.keeper.markLostByToken(tokens, reason, cause),
      },
    });
    const store = new Store(backend, keys);
    this.#store = store;
    if (counted && !store.countsPermits) throw new UnsupportedError("Counted locks need a store that counts permits");
    this.#holdings = new Holdings(options, store, keys, lifetime, counted);
    this.#attempts = new Attempts(options, store, keys, lifetime, this.#holdings, waiterId);
    this.#transfer = new LeaseTransfer(store, this.#holdings, lifetime);
    const parts: CoreParts = {
      options,
      store,
      keys,
      lifetime,
      attempts: this.#attempts,
      holdings: this.#holdings,
      waiterId,
      counted,
    };
    this.#loop = new WaitLoop(parts);
  }

  /** The resolved options (defaults filled in). */
  get options(): Readonly<Omit<O, "onLockLost">> {
    const { onLockLost: _hook, ...rest } = this.#options;
    return rest;
  }

  /** Number of locks this locker currently holds and extends. */
  get heldCount(): number {
    return this.#holdings.size;
  }

  /** Number of `obtain` calls waiting: queued behind others, or after a failed attempt. */
  get waitingCount(): number {
    return this.#loop.waiting;
  }

  /**
   * The owner of the acquisitions `locker` obtains (one object per public locker, made once): it
   * releases them through this core, and names `locker` and its kind in diagnostics messages.
   */
  ownerFor(locker: Locker, kind: LockerKind): AcquisitionOwner {
    const holdings = this.#holdings;
    const store = this.#store;
    const transfer = this.#transfer;
    // Most lockers use one lease length; a caller passing many is bounded (the cache starts afresh).
    const terms = new Map<number, AcquisitionTerms>();
    const owner: AcquisitionOwner = {
      locker,
      kind,
      releaseAcquisition: (acquisition) => holdings.release(acquisition),
      expireAcquisition: (acquisition) => holdings.keeper.markLost(acquisition, "expired"),
      handOffAcquisition: (acquisition, weight) => transfer.handOff(acquisition, kind, weight),
      resourceOf: (key) => store.resourceOf(key),
      termsOf: (duration) => {
        let found = terms.get(duration);
        if (found === undefined) {
          if (terms.size >= TERMS_KEPT) terms.clear();
          found = new AcquisitionTerms(owner, duration);
          terms.set(duration, found);
        }
        return found;
      },
    };
    return owner;
  }

  /**
   * What the lease keeper measured: extensions and extension commands sent, transient failures
   * retried, the least validity a lease had left when its extension was confirmed
   * (`minHeadroomMs`), and the latest its timer fired (`maxLatenessMs`).
   */
  get leaseStats(): LeaseKeeperStats {
    return this.#holdings.stats;
  }

  /**
   * Validates acquire options against the one table of limits (core/limits.ts); `weight` against
   * the limit is the public locker's check.
   */
  resolveRequest(options: AcquireOptions | undefined): ResolvedAcquireOptions {
    const request = resolveAcquireOptions(options, this.#options.minExpiry);
    if (request.maxHold !== undefined) {
      const expiry = request.expiry ?? this.#options.expiry;
      if (expiry !== Number.POSITIVE_INFINITY) checkMaxHold(request.maxHold, expiry);
    }
    return request;
  }

  /**
   * Throws an {@link UnsupportedError} when `key` cannot be fenced here (several Redlock nodes, or
   * a Cluster key with no usable hash tag), before anything is sent.
   */
  checkFencing(key: string): void {
    this.#store.checkFencing(this.#store.resourceOf(key));
  }

  /**
   * Waits for `key` on behalf of `owner`; call {@link checkCall} first. `probe`, while the call is
   * traced, counts its attempts. A lock on a store in this process waits without the wait loop
   * (see `DirectWaiter`: a release hands it the key); everything else waits in the loop
   * ({@link WaitLoop}).
   */
  obtain(call: AcquireCall): Promise<Acquisition> | Acquisition {
    return this.#obtain(call, same);
  }

  /**
   * {@link obtain} for a `lock` call: resolves to the release function. On a store in this process
   * the waiter's own promise resolves with it (the caller resumes one reaction after the grant).
   */
  obtainRelease(call: AcquireCall): Promise<ReleaseFunc> | ReleaseFunc {
    return this.#obtain(call, releaseOf);
  }

  /** {@link obtain}, handing the caller what `deliver` makes of the acquisition. */
  #obtain<T>(call: AcquireCall, deliver: (acquisition: Acquisition) => T): Promise<T> | T {
    if (this.#counted) this.#store.checkPermits(this.#store.resourceOf(call.key));
    else if (this.#store.inProcess !== undefined) {
      const taken = this.#takeIdleKey(call);
      return taken !== undefined ? deliver(taken) : this.#loop.obtainNow(call, deliver);
    }
    return this.#loop.obtain(call, deliver);
  }

  /**
   * The uncontended path of a lock on a store in this process: a key nobody here holds or waits
   * for is taken at once, with no waiter made and nothing queued. Anything else — or a miss —
   * waits (its first try joins the store's queue).
   */
  #takeIdleKey(call: AcquireCall): Acquisition | undefined {
    const state = this.#keys.get(call.key);
    if (state !== undefined && (state.held > 0 || state.waiters.size > 0)) return undefined;
    const outcome = this.#attempts.attemptNow(call, this.#attempts.outside);
    return outcome instanceof Acquisition ? outcome : undefined;
  }

  /** One attempt on `key`, not queued: the acquisition, or undefined when it is taken. */
  async tryObtain(call: AcquireCall): Promise<Acquisition | undefined> {
    const { key } = call;
    // A lock held here is held: no need to ask. (Permits held here may leave room for more.)
    if (this.#counted) {
      // Waiters queued here come first (across processes, the store's queue sees to that).
      if ((this.#keys.get(key)?.waiters.size ?? 0) > 0) return undefined;
      this.#store.checkPermits(this.#store.resourceOf(key));
    } else if (this.#keys.heldCount(key) > 0) return undefined;
    return this.#attempts.tryOnce(call);
  }

  /**
   * The {@link Lease} of `acquisition`, granted `weight` permits as the store counts them (its
   * owner's kind names its locker in hand-off handles). The lease keeps the acquisition itself:
   * no closures, and its `lost` signal is made only if read.
   */
  leaseOf(acquisition: Acquisition, weight: number): Lease {
    return new LeaseImpl(acquisition, weight);
  }

  /**
   * Who holds `key` and how many wait for it, as the store sees it (see `Locker.inspect`); call
   * {@link checkCall} first. Abortable; store failures reject with StoreUnavailableError.
   */
  async inspect(signal: AbortSignal | undefined, key: string): Promise<StoredView> {
    const { gate, inFlight } = this.#lifetime;
    const view = await gate.race(this.#store.inspect(this.#store.resourceOf(key)), signal, inFlight);
    // A store may queue a locker once per key, however many of its callers wait: count those here.
    const here = this.#keys.get(key)?.waiters.size ?? 0;
    return here > view.waiting ? { holders: view.holders, waiting: here } : view;
  }

  /**
   * Up to `limit` held keys that start with `prefix`, as the store sees them (see `Locker.list`),
   * in any order; call {@link checkList} first. Abortable; store failures reject with
   * StoreUnavailableError.
   */
  async list(signal: AbortSignal | undefined, prefix: string, limit: number): Promise<ListedResource[]> {
    const { gate, inFlight } = this.#lifetime;
    const listed = await gate.race(this.#store.list(prefix, limit), signal, inFlight);
    // As in inspect: callers of this locker that wait, where the store counts the locker once.
    return listed.map((entry) => {
      const here = this.#keys.get(entry.key)?.waiters.size ?? 0;
      return here > entry.view.waiting
        ? { key: entry.key, view: { holders: entry.view.holders, waiting: here } }
        : entry;
    });
  }

  /** The checks of a `list` call before anything is sent: not closed, `signal` not aborted. */
  checkList(signal: AbortSignal | undefined): void {
    const closing = this.#lifetime.closing;
    if (closing.aborted) throw closing.reason;
    signal?.throwIfAborted();
  }

  /**
   * Takes over the lease a decoded handle names (see `Locker.adopt`) on behalf of `owner`; `kind`
   * is the adopting locker's kind. Checks the handle's scope, then swaps its token in the store.
   */
  async adopt(
    signal: unknown,
    content: HandOffContent,
    options: AdoptOptions | undefined,
    owner: AcquisitionOwner,
    kind: string,
  ): Promise<Lease> {
    const { autoExtend } = resolveAdoptOptions(options);
    this.#transfer.checkScope(content, kind);
    this.checkCall(signal, content.key);
    const acquisition = await this.#transfer.adopt(signal, content, autoExtend, owner);
    return this.leaseOf(acquisition, content.weight);
  }

  /**
   * Stops the core (see `Locker.close`). Held locks are neither deleted nor extended any more:
   * they expire within their lease. Their releases still work.
   */
  close(): Promise<void> {
    this.#closed ??= this.#shutDown();
    return this.#closed;
  }

  async #shutDown(): Promise<void> {
    this.#lifetime.end();
    await this.#holdings.keeper.stop();
    await this.#lifetime.drained();
    await this.#store.watcher.close();
  }

  /** Validates a call's signal and key; throws the close error or the signal's reason. */
  checkCall(signal: unknown, key: unknown): asserts signal is AbortSignal | undefined {
    checkCall(signal, key, this.#lifetime.closing);
  }
}

/** Lease lengths whose {@link AcquisitionTerms} an owner keeps (see {@link LockCore.ownerFor}). */
const TERMS_KEPT = 64;

/** The owner of a locker that names none: this host and process. */
function defaultOwner(): string {
  return `${hostname()}:${process.pid}`;
}

/** An acquisition as it is (what `obtain` hands its caller). */
function same(acquisition: Acquisition): Acquisition {
  return acquisition;
}

/** The release function of `acquisition` (what `obtainRelease` hands a `lock` caller). */
function releaseOf(acquisition: Acquisition): ReleaseFunc {
  return acquisition.releaser.release;
}
