import { randomBytes } from "node:crypto";
import { setMaxListeners } from "node:events";
import { hostname } from "node:os";
import type { LockerKind } from "../diagnostics.js";
import {
  InvalidArgumentError,
  LockerClosedError,
  LockLostError,
  type LockLostReason,
  UnsupportedError,
} from "../errors.js";
import { CloseGate, subscribeAbort } from "../internal/abortable.js";
import { type AcquireProbe, grantTime, publishRelease } from "../internal/diagnostics.js";
import { LeaseImpl } from "../internal/lease.js";
import {
  checkCall,
  checkMaxHold,
  type ResolvedAcquireOptions,
  resolveAcquireOptions,
  resolveAdoptOptions,
} from "../internal/validate.js";
import { KeyStates } from "../internal/waiter.js";
import type { AcquireOptions, AdoptOptions, Lease, Locker, ReleaseFunc, ReleaseOutcome } from "../locker.js";
import { Acquisition, type AcquisitionOwner, AcquisitionTerms } from "./acquisition.js";
import type {
  AttemptOutcome,
  AttemptRequest,
  BackendFactory,
  ListedResource,
  LockHandle,
  Queueing,
  Registration,
  StoredView,
} from "./backend.js";
import type { AcquireCall, CoreParts, CoreSettings, Miss } from "./core-parts.js";
import { DirectWaiter } from "./direct-waiter.js";
import { encodeHandOff, type HandOffContent } from "./hand-off-handle.js";
import { InFlight } from "./in-flight.js";
import { LeaseKeeper, type LeaseKeeperStats } from "./lease-keeper.js";
import { Store } from "./store.js";
import { WaitLoop } from "./wait-loop.js";

/** How often a `tryLock` asks again after its win was read only once the lease had run out. */
const LATE_ANSWER_RETRIES = 3;

export type { CoreSettings } from "./core-parts.js";

/**
 * The one lock core: everything a lock does that is not the store, for every locker — lock,
 * semaphore and read-write views alike — over a {@link Backend} (see docs/architecture.md).
 *
 * - Validation (one table of limits), the per-key FIFO of waiters and the wait loop
 *   ({@link WaitLoop}), grants handed over by a backend with a grant queue ({@link GrantDesk}),
 *   the lease record ({@link Acquisition}), lease keeping and loss reporting ({@link LeaseKeeper}),
 *   release outcomes, counts, and diagnostics.
 * - Every held lease is extended from its own validity: every `expiry / 2`, and early enough that
 *   an extension answering within `operationTimeout` lands before the lease runs out. A lease
 *   found lost is reported through `onLockLost` and its `lost` signal; its holder keeps running.
 * - `close()` stops extension, rejects waiters, and resolves once no store operation of the
 *   locker is in flight; it never closes the caller's clients.
 */
export class LockCore<O extends CoreSettings = CoreSettings> {
  readonly #options: O;
  readonly #store: Store;
  readonly #keeper: LeaseKeeper;
  /** Per key: how many acquisitions are held here, and who waits here (FIFO). */
  readonly #keys = new KeyStates<LockHandle, Registration>();
  /**
   * Per key, the clean-up of attempts abandoned in flight (see {@link #cleanUpAbandoned}): until it
   * ran, such an attempt may have left a queue entry in the store, which a `tryObtain` of the key
   * lets finish first (an aborted waiter never makes the next `tryLock` miss).
   */
  readonly #abandoned = new Map<string, Promise<void>>();
  /** Store operations in flight (close() waits for them). */
  readonly #inFlight = new InFlight();
  readonly #closing = new AbortController();
  /** Cuts in-flight attempts short on close (waits listen to `#closing` instead). */
  readonly #gate = new CloseGate();
  /** This locker's id in the cross-process grant queues. */
  readonly #waiterId = randomBytes(8).toString("hex");
  /** The three ways an attempt relates to the grant queue (shared, so attempts allocate none). */
  readonly #queueings: Readonly<Record<"first" | "leave" | "keep", Queueing>>;
  #closed: Promise<void> | undefined;
  /** Counted locks (semaphores, read-write locks): every waiter has its own queue entry. */
  readonly #counted: boolean;
  /**
   * Counted locks on a store in another process: releases tell the store when waiters are likely
   * queued (see `LockHandle.contended`).
   */
  readonly #hintsContention: boolean;
  /** What the wait loop and the grant desk share with the core. */
  readonly #parts: CoreParts;
  readonly #loop: WaitLoop;

  /**
   * @param options validated options (the core's settings and whatever the store adds).
   * @param makeBackend makes the store's backend, given this locker's waiter id and event sink.
   * @param limit permits per key for counted locks (semaphores, read-write locks); `undefined` for locks.
   */
  constructor(options: O, makeBackend: BackendFactory, limit?: number) {
    // Every waiter listens for close; many waiters are normal, not a leak.
    setMaxListeners(0, this.#closing.signal);
    // Keeps the close signal's abort hub (and its one listener) for the core's life: otherwise a
    // lone waiter would add and remove an event listener at every wait (a hand-off's hot path).
    // It rejects the waiters of a store in this process, which do not subscribe one by one.
    subscribeAbort(this.#closing.signal, (reason) => DirectWaiter.closeAll(this.#keys, reason));
    this.#options = options;
    this.#counted = limit !== undefined;
    this.#queueings = {
      first: { waiterId: this.#waiterId, joinOnMiss: true, leaveOnSuccess: false },
      leave: { waiterId: this.#waiterId, joinOnMiss: true, leaveOnSuccess: true },
      keep: { waiterId: this.#waiterId, joinOnMiss: false, leaveOnSuccess: false },
    };
    this.#store = new Store(
      makeBackend({
        waiterId: this.#waiterId,
        owner: options.owner ?? defaultOwner(),
        events: {
          released: (key) => {
            // Counted: every waiter of the key competes (permits held here may leave room). A lock:
            // while this locker holds the key, the message is stale (or our own).
            if (this.#counted) this.#keys.notifyAll(key);
            else if (this.#keys.heldCount(key) === 0) this.#keys.notifyHead(key);
          },
          granted: (key, grant) => this.#loop.grants.onGrant(key, grant),
          missed: () => this.#keys.notifyAllHeads(),
          lost: (tokens, reason, cause) => this.#keeper.markLostByToken(tokens, reason, cause),
        },
      }),
    );
    this.#hintsContention = this.#counted && this.#store.inProcess === undefined;
    if (this.#counted && !this.#store.countsPermits) {
      throw new UnsupportedError("Counted locks need a store that counts permits");
    }
    const { operationTimeout, sweepConcurrency } = options;
    this.#keeper = new LeaseKeeper({
      store: this.#store,
      operationTimeout,
      sweepConcurrency,
      onLockLost: options.onLockLost,
      // A lost lock frees the key as far as this process knows: let the next waiter try.
      onLost: (acquisition) => {
        this.#forget(acquisition);
        // A store whose locks never expire on their own, or a lease held until released (memory)
        // that its maxHold ended, is freed in the store by the core (sent before the next waiter
        // here tries; the holder's own release then finds it expired).
        if (this.#store.heldUntilReleased || acquisition.duration === Number.POSITIVE_INFINITY) {
          void this.#track(this.#store.release(acquisition.handle, true));
        }
        this.#keys.notifyHead(acquisition.key);
      },
      track: (operation) => this.#track(operation),
    });
    this.#parts = {
      options,
      store: this.#store,
      keys: this.#keys,
      waiterId: this.#waiterId,
      closing: this.#closing.signal,
      gate: this.#gate,
      counted: this.#counted,
      queueings: this.#queueings,
      track: (promise) => this.#track(promise),
      resourceOf: (key) => this.#resourceOf(key),
      isAbandonment: (error, signal) => this.#isAbandonment(error, signal),
      attempt: (call, queueing) => this.#attempt(call.signal, call.key, call.request, queueing, call.owner, call.probe),
      attemptNow: (call, queueing) =>
        this.#attemptNow(call.signal, call.key, call.request, queueing, call.owner, call.probe),
      registerGrant: (call, handle) => this.#register(call.key, handle, undefined, call.request, true, call.owner),
    };
    this.#loop = new WaitLoop(this.#parts);
  }

  /** The resolved options (defaults filled in). */
  get options(): Readonly<Omit<O, "onLockLost">> {
    const { onLockLost: _hook, ...rest } = this.#options;
    return rest;
  }

  /** Number of locks this locker currently holds and extends. */
  get heldCount(): number {
    return this.#keeper.size;
  }

  /** Number of `obtain` calls waiting: queued behind others, or after a failed attempt. */
  get waitingCount(): number {
    return this.#loop.waiting;
  }

  /**
   * The owner of the acquisitions `locker` obtains (one object per public locker, made once): it
   * releases them through this engine, and names `locker` and its kind in diagnostics messages.
   */
  ownerFor(locker: Locker, kind: LockerKind): AcquisitionOwner {
    const _store = this.#store;
    // Most lockers use one lease length; a caller passing many is bounded (the cache starts afresh).
    const terms = new Map<number, AcquisitionTerms>();
    const owner: AcquisitionOwner = {
      locker,
      kind,
      releaseAcquisition: (acquisition) => this.#release(acquisition),
      expireAcquisition: (acquisition) => this.#keeper.markLost(acquisition, "expired"),
      handOffAcquisition: (acquisition, weight) => this.#handOff(acquisition, kind, weight),
      resourceOf: (key) => this.#resourceOf(key),
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
    return this.#keeper.stats;
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
    this.#store.checkFencing(this.#resourceOf(key));
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
   * the waiter's own promise resolves with it (one reaction between the grant and the caller, not
   * two: a hand-off's latency).
   */
  obtainRelease(call: AcquireCall): Promise<ReleaseFunc> | ReleaseFunc {
    return this.#obtain(call, releaseOf);
  }

  /** {@link obtain}, handing the caller what `deliver` makes of the acquisition. */
  #obtain<T>(call: AcquireCall, deliver: (acquisition: Acquisition) => T): Promise<T> | T {
    if (this.#counted) this.#store.checkPermits(this.#resourceOf(call.key));
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
    const outcome = this.#attemptNow(call.signal, call.key, call.request, this.#queueings.keep, call.owner, call.probe);
    return outcome instanceof Acquisition ? outcome : undefined;
  }

  /** One attempt on `key`, not queued: the acquisition, or undefined when it is taken. */
  async tryObtain(call: AcquireCall): Promise<Acquisition | undefined> {
    const { signal, key, request, owner, probe } = call;
    // A lock held here is held: no need to ask. (Permits held here may leave room for more.)
    const state = this.#keys.get(key);
    if (this.#counted) {
      // Waiters queued here come first (across processes, the store's queue sees to that).
      if ((state?.waiters.size ?? 0) > 0) return undefined;
      this.#store.checkPermits(this.#resourceOf(key));
    } else if (this.#keys.heldCount(key) > 0) return undefined;
    const abandoned = this.#abandoned.size === 0 ? undefined : this.#abandoned.get(key);
    if (abandoned !== undefined) await this.#gate.race(abandoned, signal);
    for (let late = 0; ; late++) {
      const outcome = await this.#attempt(signal, key, request, this.#queueings.keep, owner, probe);
      if (outcome instanceof Acquisition) return outcome;
      // "expired-on-arrival": the key was free and taken for us, but this process read the answer
      // only after the lease had run out (a burst or a pause stalled it). That is no "held
      // elsewhere": ask again, a few times, rather than answer false for a free key.
      if (outcome.kind !== "expired-on-arrival" || late === LATE_ANSWER_RETRIES) return undefined;
    }
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
    const view = await this.#gate.race(this.#store.inspect(this.#resourceOf(key)), signal, this.#inFlight);
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
    const listed = await this.#gate.race(this.#store.list(prefix, limit), signal, this.#inFlight);
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
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
    signal?.throwIfAborted();
  }

  /**
   * Takes over the lease a decoded handle names (see `Locker.adopt`) on behalf of `owner`; `scope`
   * is the adopting locker's kind. Checks the handle's scope, then swaps its token in the store.
   */
  async adopt(
    signal: unknown,
    content: HandOffContent,
    options: AdoptOptions | undefined,
    owner: AcquisitionOwner,
    scope: string,
  ): Promise<Lease> {
    const { autoExtend } = resolveAdoptOptions(options);
    const support = this.#store.handOff("Adopting a lease");
    if (content.scope !== `${scope}|${support.scope}`) {
      throw new InvalidArgumentError(
        "handle",
        `a handle from a locker of the same kind and store (${scope}|${support.scope}); it is from ${content.scope}`,
        "(a handle: not shown)",
      );
    }
    this.checkCall(signal, content.key);
    const { key, token, weight, duration, fencingToken } = content;
    const resource = this.#resourceOf(key);
    const adopted = await this.#gate.race(
      this.#store.adopt({ resource, token, weight, duration }),
      signal,
      this.#inFlight,
    );
    if (typeof adopted === "string") throw new LockLostError(key, adopted);
    const request = { fencing: fencingToken !== undefined, weight, autoExtend, expiry: duration, maxHold: undefined };
    return this.leaseOf(this.#register(key, adopted, fencingToken, request, false, owner), weight);
  }

  /**
   * Hands `acquisition` off (see `Lease.handOff`): extends it once, stops keeping it here, and
   * encodes its handle.
   */
  async #handOff(acquisition: Acquisition, scope: string, weight: number): Promise<string> {
    const support = this.#store.handOff("Handing off a lease");
    if (acquisition.state !== "held" || acquisition.started) {
      throw new LockLostError(acquisition.key, acquisition.state === "held" ? "released" : lostReason(acquisition));
    }
    const store = this.#store;
    const outcome = await this.#track(
      support.detach === undefined
        ? store.extend([acquisition.handle], acquisition.duration).then(([first]) => first)
        : support.detach(acquisition.handle, acquisition.duration),
    );
    if (acquisition.state !== "held" || acquisition.started) {
      throw new LockLostError(acquisition.key, acquisition.state === "held" ? "released" : lostReason(acquisition));
    }
    if (outcome === "taken" || outcome === "expired") {
      this.#keeper.markLost(acquisition, outcome);
      throw new LockLostError(acquisition.key, outcome);
    }
    if (outcome !== "extended") throw outcome ?? new Error("The store answered no extension outcome");
    if (this.#keeper.remove(acquisition)) this.#forget(acquisition);
    acquisition.state = "handed-off";
    const { key, token, duration, fencingToken } = acquisition;
    return encodeHandOff({ scope: `${scope}|${support.scope}`, key, token, weight, duration, fencingToken });
  }

  /**
   * Stops the engine (see `Locker.close`). Held locks are neither deleted nor extended any more:
   * they expire within their lease. Their releases still work.
   */
  close(): Promise<void> {
    this.#closed ??= this.#shutDown();
    return this.#closed;
  }

  async #shutDown(): Promise<void> {
    const closed = new LockerClosedError();
    this.#closing.abort(closed);
    this.#gate.close(closed);
    await this.#keeper.stop();
    if (this.#inFlight.count > 0) await this.#inFlight.drained();
    await this.#store.watcher.close();
  }

  /** Validates a call's signal and key; throws the close error or the signal's reason. */
  checkCall(signal: unknown, key: unknown): asserts signal is AbortSignal | undefined {
    checkCall(signal, key, this.#closing.signal);
  }

  /**
   * One acquisition attempt (plus its fencing token when asked), abortable: if `signal` aborts or
   * the locker closes while it is in flight, it rejects at once and the attempt is cleaned up
   * once it settles (see {@link #cleanUpAbandoned}). Resolves to the acquisition, or to what the
   * attempt found instead.
   */
  #attempt(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    queueing: Queueing,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition | Miss> | Acquisition | Miss {
    const store = this.#store;
    if (store.inProcess !== undefined) return this.#attemptNow(signal, key, request, queueing, owner, probe);
    if (probe !== undefined) probe.attempts += 1;
    const sent = store.acquire(this.#attemptRequest(key, request, queueing));
    return this.#attemptInFlight(signal, key, request, queueing, owner, sent);
  }

  /**
   * {@link #attempt} on a store in this process, which answers at once: nothing in flight to
   * track, race or clean up.
   */
  #attemptNow(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    queueing: Queueing,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Acquisition | Miss {
    const inProcess = this.#store.inProcess;
    if (inProcess === undefined) throw new TypeError("The store answers attempts asynchronously");
    if (probe !== undefined) probe.attempts += 1;
    this.#gate.check(signal);
    return this.#settle(inProcess.acquireNow(this.#attemptRequest(key, request, queueing)), key, request, owner);
  }

  /** What the store is asked for by one attempt of `request` on `key`. */
  #attemptRequest(key: string, request: ResolvedAcquireOptions, queueing: Queueing): AttemptRequest {
    return {
      resource: this.#resourceOf(key),
      duration: request.expiry ?? this.#options.expiry,
      queueing,
      fencing: request.fencing,
      weight: request.weight,
    };
  }

  /** The rest of {@link #attempt} for a store that answers asynchronously. */
  async #attemptInFlight(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    queueing: Queueing,
    owner: AcquisitionOwner,
    sent: Promise<AttemptOutcome>,
  ): Promise<Acquisition | Miss> {
    let outcome: AttemptOutcome;
    try {
      outcome = await this.#gate.race(sent, signal, this.#inFlight);
    } catch (error) {
      if (this.#isAbandonment(error, signal)) this.#noteAbandoned(key, this.#cleanUpAbandoned(sent, key, queueing));
      throw error;
    }
    return this.#settle(outcome, key, request, owner);
  }

  /** An attempt's answer: the acquisition it made (registered), or what it found instead. */
  #settle(
    outcome: AttemptOutcome,
    key: string,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
  ): Acquisition | Miss {
    if (outcome.kind !== "acquired") return outcome;
    if (request.fencing && outcome.fencingToken === undefined) {
      // Only a store without fencing could answer so; checkFencing refused that up front.
      void this.#track(this.#store.release(outcome.handle, true));
      return { kind: "expired-on-arrival" };
    }
    return this.#register(key, outcome.handle, outcome.fencingToken, request, false, owner);
  }

  /**
   * After an attempt that was abandoned in flight has settled — including a retry with the
   * script's body after a flushed script cache, which is sent after everything sent before it
   * settled — leaves the grant queue (when nobody here waits for the key any more; a grant made
   * to its registration meanwhile is handed over in the same step) and then releases a grant that
   * arrived too late. Both are sent with the script body, in that order, so the release cannot
   * grant the key to this locker after it left.
   */
  async #cleanUpAbandoned(attempt: Promise<AttemptOutcome>, key: string, queueing: Queueing): Promise<void> {
    const late = await attempt.catch(() => undefined);
    const resource = this.#resourceOf(key);
    // The registration the key may have been granted to: the late attempt's own, else the one it
    // carried.
    const registered = late?.kind === "held" ? late.registration : undefined;
    const state = this.#keys.get(key);
    // A counted lock's waiter has its own entry (its own id): it always leaves.
    const ownEntry = queueing.waiterId !== this.#waiterId;
    const leaving =
      queueing.joinOnMiss && (ownEntry || (state?.waiters.size ?? 0) === 0)
        ? this.#store.leaveQueue(resource, queueing.waiterId, registered?.token ?? queueing.grantedToken)
        : undefined;
    if (ownEntry) {
      await Promise.all([leaving, late?.kind === "acquired" ? this.#releaseLate(key, late.handle) : undefined]);
      return;
    }
    if (leaving !== undefined && state !== undefined) state.handOff = undefined;
    // The late registration is the locker's latest unless a later attempt has answered since (the
    // store keeps one per locker, and ran that attempt after this one).
    if (leaving === undefined && registered !== undefined && state !== undefined) {
      if (state.handOff?.token === queueing.grantedToken) state.handOff = registered;
    }
    const releasing = late?.kind === "acquired" ? this.#releaseLate(key, late.handle) : undefined;
    await Promise.all([leaving, releasing]);
  }

  /** Tracks the clean-up of an abandoned attempt on `key` (see {@link #abandoned}) until it settles. */
  #noteAbandoned(key: string, cleanUp: Promise<void>): void {
    const all = Promise.all([this.#abandoned.get(key), this.#track(cleanUp)]).then(
      () => undefined,
      () => undefined,
    );
    this.#abandoned.set(key, all);
    void all.then(() => {
      if (this.#abandoned.get(key) === all) this.#abandoned.delete(key);
    });
  }

  /** True when `error` is this call's abort or the locker's close, not a failed attempt. */
  #isAbandonment(error: unknown, signal: AbortSignal | undefined): boolean {
    return (signal?.aborted === true && error === signal.reason) || error === this.#closing.signal.reason;
  }

  #resourceOf(key: string): string {
    return this.#keys.get(key)?.resource ?? this.#store.resourceOf(key);
  }

  /**
   * Starts tracking a fresh grant: extension, deadline, and its release. A hand-off grant's TTL is
   * the short grace, so a lease that is not auto-extended is still extended once, to its expiry.
   */
  #register(
    key: string,
    handle: LockHandle,
    fencingToken: bigint | undefined,
    request: ResolvedAcquireOptions,
    handedOver: boolean,
    owner: AcquisitionOwner,
  ): Acquisition {
    const terms = owner.termsOf(request.expiry ?? this.#options.expiry);
    const acquisition = new Acquisition(terms, key, handle, fencingToken);
    // Granted from the store's queue: others may be queued behind it.
    if (handedOver) acquisition.contended = true;
    if (!request.autoExtend) acquisition.keepAlive = handedOver ? "once" : "never";
    if (request.maxHold !== undefined) capHold(acquisition, request.maxHold);
    const grantedAt = grantTime();
    if (grantedAt !== undefined) acquisition.grantedAt = grantedAt;
    this.#keys.hold(key);
    this.#keeper.add(acquisition);
    return acquisition;
  }

  /** Stops counting `acquisition` as held by this locker (it was released or lost). */
  #forget(acquisition: Acquisition): void {
    this.#keys.unhold(acquisition.key);
  }

  /**
   * Releases `acquisition` and publishes what the release found (while anyone listens): at once on
   * a store in this process, which answers releases synchronously. Never throws or rejects (see
   * `AcquisitionOwner.releaseAcquisition`).
   */
  #release(acquisition: Acquisition): Promise<ReleaseOutcome> | ReleaseOutcome {
    // Handed to another process: not ours to delete any more.
    if (acquisition.state === "handed-off") return "handed-off";
    const { handle } = acquisition;
    // A lease valid until Infinity (memory) never passes its deadline: no need to read the clock.
    const now = handle.validUntil === Number.POSITIVE_INFINITY ? undefined : performance.now();
    const wasPastDeadline = now !== undefined && now >= handle.validUntil;
    const store = this.#store;
    const inProcess = store.inProcess;
    if (inProcess !== undefined) {
      this.#settleReleased(acquisition, wasPastDeadline);
      return this.#released(acquisition, wasPastDeadline, inProcess.releaseNow(handle));
    }
    // Counted: callers here waiting for the key have queued in the store (or soon will), or the
    // latest release here handed the key on (another process's waiters are likely queued again).
    if (this.#hintsContention && !acquisition.contended) {
      const state = this.#keys.get(acquisition.key);
      if (state !== undefined && (state.grantedOnward || state.waiters.size > 0)) acquisition.contended = true;
    }
    // Sent first: the bookkeeping below runs while the command travels, and a waiter in another
    // process hears of the release that much sooner (no store reads what it changes).
    const sent = store.release(handle);
    this.#settleReleased(acquisition, wasPastDeadline);
    // Counted in flight by the reaction that acts on the answer (one reaction, not two). A store's
    // release never rejects; one that did anyway reports "unknown", so this promise never rejects.
    this.#inFlight.begin();
    return sent.then(
      (outcome) => {
        this.#inFlight.end();
        return this.#releasedOrUnknown(acquisition, wasPastDeadline, outcome);
      },
      () => {
        this.#inFlight.end();
        return this.#releasedOrUnknown(acquisition, wasPastDeadline, "unknown");
      },
    );
  }

  /** {@link #released}, answering "unknown" should it throw: a release never rejects. */
  #releasedOrUnknown(acquisition: Acquisition, wasPastDeadline: boolean, outcome: ReleaseOutcome): ReleaseOutcome {
    try {
      return this.#released(acquisition, wasPastDeadline, outcome);
    } catch {
      return "unknown";
    }
  }

  /** What a release changes here: the lease is no longer kept (or is lost, if it ran out), nor held. */
  #settleReleased(acquisition: Acquisition, wasPastDeadline: boolean): void {
    // A lease left to expire whose deadline passed before its timer fired (a blocked event loop)
    // expired all the same: its `lost` says so, as if the timer had fired first.
    if (wasPastDeadline && acquisition.keepAlive === "never") this.#keeper.markLost(acquisition, "expired");
    else if (this.#keeper.remove(acquisition)) this.#forget(acquisition);
    acquisition.state = "released";
  }

  /** The rest of {@link #release} once the store answered `outcome`: wakes whoever is next here. */
  #released(acquisition: Acquisition, wasPastDeadline: boolean, outcome: ReleaseOutcome): ReleaseOutcome {
    const { handle } = acquisition;
    if (this.#hintsContention && outcome === "released") {
      const state = this.#keys.get(acquisition.key);
      if (state !== undefined) state.grantedOnward = handle.grantedTo !== undefined && handle.grantedTo !== "";
    }
    // Without a cross-process queue, wake this process's next waiter without waiting for our own
    // message; with one, the release message says whose turn it is — and a release that found
    // nobody queued publishes nothing, so this process's own waiters (not yet in the queue) are
    // woken here.
    // (The store is asked last: naming the resource costs a lookup or two, and most releases
    // answer first.)
    this.#wakeAfterRelease(acquisition.key, handle, outcome);
    // A lease left to expire that ran out before its release expired, whoever holds the key now.
    const found = outcome === "taken" && acquisition.keepAlive === "never" && wasPastDeadline ? "expired" : outcome;
    return publishRelease(acquisition.owner, acquisition.key, acquisition.grantedAt, found);
  }

  /**
   * After a release of `key` here (a lease's, or an abandoned attempt's late grant): wakes this
   * process's waiters unless the store handed the key to a queued waiter, whose grant says whose
   * turn it is.
   */
  #wakeAfterRelease(key: string, handle: LockHandle, outcome: ReleaseOutcome): void {
    if (handle.grantedTo === "" || outcome === "unknown" || !this.#store.grants(handle.resource)) {
      // Counted, no queue: every waiter here competes on its own.
      if (this.#counted && !this.#store.grants(handle.resource)) this.#keys.notifyAll(key);
      else this.#keys.notifyHead(key);
    }
  }

  /** Releases an abandoned attempt's late grant (ordered after it), then wakes waiters here. */
  async #releaseLate(key: string, handle: LockHandle): Promise<void> {
    this.#wakeAfterRelease(key, handle, await this.#store.release(handle, true));
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    return this.#inFlight.track(promise);
  }
}

/** Lease lengths whose {@link AcquisitionTerms} an owner keeps (see {@link LockCore.ownerFor}). */
const TERMS_KEPT = 64;

/** The owner of a locker that names none: this host and process. */
function defaultOwner(): string {
  return `${hostname()}:${process.pid}`;
}

/**
 * Caps how long `acquisition` is kept: `maxHold` ms from now. A lease held until released
 * (memory: valid until `Infinity`) is left to run out at the cap instead.
 */
function capHold(acquisition: Acquisition, maxHold: number): void {
  const holdUntil = Math.floor(performance.now() + maxHold);
  acquisition.holdUntil = holdUntil;
  if (acquisition.validUntil === Number.POSITIVE_INFINITY) {
    acquisition.validUntil = holdUntil;
    acquisition.reachCap();
  }
}

/** Why a lease that is no longer held is not: what its `lost` says, else released or handed off. */
function lostReason(acquisition: Acquisition): LockLostReason {
  if (acquisition.state === "handed-off") return "handed-off";
  const lost = acquisition.lostSignal;
  return lost.aborted && lost.reason instanceof LockLostError ? lost.reason.reason : "released";
}

/** An acquisition as it is (what `obtain` hands its caller). */
function same(acquisition: Acquisition): Acquisition {
  return acquisition;
}

/** The release function of `acquisition` (what `obtainRelease` hands a `lock` caller). */
function releaseOf(acquisition: Acquisition): ReleaseFunc {
  return acquisition.releaser.release;
}
