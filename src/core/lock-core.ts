import { randomBytes } from "node:crypto";
import { setMaxListeners } from "node:events";
import type { LockerKind } from "../diagnostics.js";
import type { LockLostError } from "../errors.js";
import { InvalidArgumentError, LockerClosedError, UnsupportedError } from "../errors.js";
import { abortable, CloseGate, subscribeAbort } from "../internal/abortable.js";
import { Backoff } from "../internal/backoff.js";
import { type AcquireProbe, grantTime, publishRelease } from "../internal/diagnostics.js";
import { LeaseImpl } from "../internal/lease.js";
import {
  type ResolvedAcquireOptions,
  resolveAcquireOptions,
  validateKey,
  validateSignal,
} from "../internal/validate.js";
import { KeyStates, Waiter } from "../internal/waiter.js";
import type { AcquireOptions, Lease, Locker, ReleaseOutcome } from "../locker.js";
import { Acquisition, type AcquisitionOwner } from "./acquisition.js";
import {
  type AttemptOutcome,
  type Backend,
  type BackendFactory,
  type Grant,
  LockHandle,
  type QueueIntent,
  type Registration,
} from "./backend.js";
import { LeaseKeeper, type LeaseKeeperStats } from "./lease-keeper.js";
import { MIN_EXPIRY_MS } from "./limits.js";

/** How often a `tryLock` asks again after its win was read only once the lease had run out. */
const LATE_ANSWER_RETRIES = 3;
/** An attempt that did not acquire: someone else holds the key, or the grant came too late. */
type Miss = Exclude<AttemptOutcome, { kind: "acquired" }>;

/**
 * The machinery behind every Redis locker ({@link RedisLocker}, `RedisSemaphore`, the views of
 * `RedisReadWriteLocker`): one node, a Redis Cluster, or (locks only) a Redlock quorum.
 *
 * - Each acquisition sets `prefix + key` to a random 16-byte token with a TTL of `expiry` (on a
 *   free key a plain SET NX); release is an atomic compare-and-delete or hand-over.
 * - In one locker, waiters of a key queue FIFO and only the head competes. On one node or a
 *   Cluster, lockers also queue across processes: a release grants the key to the longest-waiting
 *   live locker (sets it to the token that locker registered) and tells it so on that locker's own
 *   grant channel (`prefix + "grant:" + id`), so one release wakes one process, however many
 *   wait, and the grantee holds the lock without a further round trip. Without a queue (a quorum),
 *   a release publishes on the key's channel and every waiter tries. One subscriber connection per
 *   node, duplicated from the caller's client, carries both.
 * - Every held lock is extended from its own validity: every `expiry / 2`, and early enough that
 *   an extension answering within `operationTimeout` lands before the lease runs out (see
 *   {@link LeaseKeeper}). A lock found lost is reported through `onLockLost` and the lease's
 *   `lost` signal; its holder keeps running.
 * - The caller owns the clients: `close()` never closes them.
 */
/** The settings the core needs from a locker's resolved options (a store adds its own). */
export interface CoreSettings {
  /** The default lease length, in ms. */
  readonly expiry: number;
  /** The bound of one store operation, in ms (extensions are scheduled to land before deadlines). */
  readonly operationTimeout: number;
  /** The safety net's first and longest wait between attempts, in ms. */
  readonly backoffMin: number;
  readonly backoffMax: number;
  /** How many extension calls may be in flight at once. */
  readonly sweepConcurrency: number;
  /** The user's hook for lost leases; what it throws is swallowed. */
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
}

export class LockCore<O extends CoreSettings = CoreSettings> {
  readonly #options: O;
  readonly #store: Backend;
  readonly #keeper: LeaseKeeper;
  /** Per key: how many acquisitions are held here, and who waits here (FIFO). */
  readonly #keys = new KeyStates<LockHandle, Registration>();
  /** Redis operations in flight (close() waits for them); a count, not a Set of promises. */
  #inFlight = 0;
  /** Resolves close()'s wait once the last in-flight operation has settled. */
  #drained: (() => void) | undefined;
  readonly #closing = new AbortController();
  /** Cuts in-flight attempts short on close (waits listen to `#closing` instead). */
  readonly #gate = new CloseGate();
  /** This locker's id in the cross-process hand-off queues. */
  readonly #waiterId = randomBytes(8).toString("hex");
  /** Callers of `obtain` whose first attempt failed (or who queued behind others), still waiting. */
  #waiting = 0;
  /** The three ways an attempt relates to the hand-off queue (shared, so attempts allocate none). */
  readonly #intents: Readonly<Record<"first" | "leave" | "keep", QueueIntent>>;
  #closed: Promise<void> | undefined;

  /** Counted locks (semaphores, read-write locks) use the permit scripts; locks the lock scripts. */
  readonly #counted: boolean;
  /** Counted locks: waiters by their own id in the store's queue (see {@link #obtainCounted}). */
  readonly #countedWaiters = new Map<string, CountedWaiter>();
  #waiterSeq = 0;

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
    subscribeAbort(this.#closing.signal, ignoreAbort);
    this.#options = options;
    this.#counted = limit !== undefined;
    this.#intents = {
      first: { waiterId: this.#waiterId, join: true, onSuccess: "keep" },
      leave: { waiterId: this.#waiterId, join: true, onSuccess: "leave" },
      keep: { waiterId: this.#waiterId, join: false, onSuccess: "keep" },
    };
    this.#store = makeBackend({
      waiterId: this.#waiterId,
      events: {
        released: (key) => {
          // While this locker holds the key, the message is stale (or our own).
          if (this.#keys.heldCount(key) === 0) this.#keys.notifyHead(key);
        },
        granted: (key, grant) => this.#onGrant(key, grant),
        missed: () => this.#keys.notifyAllHeads(),
        lost: (tokens, reason, cause) => this.#keeper.markLostByToken(tokens, reason, cause),
      },
    });
    if (this.#counted && !this.#store.countsPermits) {
      throw new UnsupportedError("Counted locks need a store that counts permits");
    }
    const { operationTimeout, sweepConcurrency } = options;
    this.#keeper = new LeaseKeeper(this.#store, {
      operationTimeout,
      sweepConcurrency,
      onLockLost: options.onLockLost,
      // A lost lock frees the key as far as this process knows: let the next waiter try.
      onLost: (acquisition) => {
        this.#forget(acquisition);
        // A store whose locks never expire on their own frees what the core gave up on (sent
        // before the next waiter here tries; the holder's own release then finds it expired).
        if (this.#store.expires === false) void this.#track(this.#store.release(acquisition.handle, true));
        this.#keys.notifyHead(acquisition.key);
      },
      track: (operation) => this.#track(operation),
    });
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
    return this.#waiting;
  }

  /**
   * The owner of the acquisitions `locker` obtains (one object per public locker, made once): it
   * releases them through this engine, and names `locker` and its kind in diagnostics messages.
   */
  ownerFor(locker: Locker, kind: LockerKind): AcquisitionOwner {
    return { locker, kind, releaseAcquisition: (acquisition) => this.#release(acquisition) };
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
   * Validates acquire options as far as every Redis locker agrees: `expiry` at least
   * {@link MIN_EXPIRY_MS} (a lease shorter than 2 × `operationTimeout` is still extended at half
   * its life: see the lease keeper). `weight` against the limit is the caller's check.
   */
  resolveRequest(options: AcquireOptions | undefined): ResolvedAcquireOptions {
    const request = resolveAcquireOptions(options);
    const { expiry } = request;
    if (expiry !== undefined && expiry < MIN_EXPIRY_MS) {
      throw new InvalidArgumentError("options.expiry", `a safe integer >= ${MIN_EXPIRY_MS} (milliseconds)`, expiry);
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
   * Waits for `key` (see {@link #obtain}) on behalf of `owner`; call {@link checkCall} first.
   * `probe`, while the call is traced, counts its attempts.
   */
  obtain(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition> {
    if (!this.#counted) return this.#obtain(signal, key, request, owner, probe);
    this.#store.checkResource(this.#resourceOf(key));
    return this.#obtainCounted(signal, key, request, owner, probe);
  }

  /** One attempt on `key`, not queued: the acquisition, or undefined when it is taken. */
  async tryObtain(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition | undefined> {
    // A lock held here is held: no need to ask. (Permits held here may leave room for more.)
    const state = this.#keys.get(key);
    if (this.#counted) {
      // Waiters queued here come first (across processes, the store's queue sees to that).
      if ((state?.waiters.size ?? 0) > 0) return undefined;
      this.#store.checkResource(this.#resourceOf(key));
    } else if (this.#keys.heldCount(key) > 0) return undefined;
    for (let late = 0; ; late++) {
      const outcome = await this.#attempt(signal, key, request, this.#intents.keep, owner, probe);
      if (outcome instanceof Acquisition) return outcome;
      // "expired-on-arrival": the key was free and taken for us, but this process read the answer
      // only after the lease had run out (a burst or a pause stalled it). That is no "held
      // elsewhere": ask again, a few times, rather than answer false for a free key.
      if (outcome.kind !== "expired-on-arrival" || late === LATE_ANSWER_RETRIES) return undefined;
    }
  }

  /** The {@link Lease} of `acquisition`. */
  leaseOf(acquisition: Acquisition): Lease {
    return new LeaseImpl({
      key: acquisition.key,
      releaser: acquisition.releaser,
      lost: acquisition.lostSignal,
      validUntil: () => acquisition.validUntil,
      onDeadlinePassed: () => this.#keeper.markLost(acquisition, "expired"),
      fencingToken: acquisition.fencingToken,
    });
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
    if (this.#inFlight > 0) {
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
      });
    }
    await this.#store.watcher.close();
  }

  /** Validates a call's signal and key; throws the close error or the signal's reason. */
  checkCall(signal: unknown, key: unknown): asserts signal is AbortSignal | undefined {
    validateSignal(signal);
    validateKey(key);
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
    signal?.throwIfAborted();
  }

  /**
   * Waits in the key's local FIFO queue until an attempt succeeds, the signal aborts, or close.
   * Every call joins the queue at once, so calls made in the same tick keep their order. The head
   * of a queue nobody here holds tries at once, before subscribing (the uncontended path); after
   * that, it waits for a release message or its safety-net timeout between attempts.
   */
  async #obtain(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition> {
    const state = this.#keys.open(key);
    state.resource ??= this.#store.resourceOf(key);
    const resource = state.resource;
    const waiter = new Waiter<LockHandle>();
    state.waiters.push(waiter);
    const queued = this.#store.hasQueue(resource);
    let acquired = false;
    /** An attempt was cut short in flight: its own clean-up leaves the hand-off queue. */
    let abandoned = false;
    let subscribed = false;
    /** Counted in `waitingCount` (from its first wait on). */
    let waiting = false;
    try {
      // The lean first try: nobody here holds or waits for the key. A head behind this locker's
      // own holder tries at once too (with a hand-off queue): it fails, but takes the locker's
      // place in the queue now rather than at its first poll — other processes' waiters would
      // be served ahead of it meanwhile.
      const isHead = state.waiters.head === waiter;
      let leanTry = isHead && state.held === 0;
      let attemptNow = leanTry || (isHead && queued);
      const listening = this.#store.watcher.isWatching(resource);
      // The lean try joins the queue on failure only on a key that had a waiter here lately (it is
      // likely to fail); elsewhere it is a plain SET NX, and a failure joins at the retry below.
      const leanJoins = leanTry && queued && listening && performance.now() - state.waitedAt < this.#options.backoffMax;
      // If the channel was already confirmed before that try, no release can have slipped by.
      // Otherwise one may have, between the failed first try and the subscription (its message,
      // or its grant to this locker, then reached nobody): try once more after subscribing. That
      // holds for a first try behind this locker's own holder as much as for the lean one.
      const retryAfterSubscribing = !listening || (leanTry && !(leanJoins || !queued));
      let lastRetryAfter: number | undefined;
      /** When this waiter last tried (which also refreshed its liveness in the hand-off queue). */
      let lastAttemptAt = performance.now();
      let backoff: Backoff | undefined;
      let signals: Array<AbortSignal | undefined> | undefined;
      for (;;) {
        // Only the head competes; without a cross-process queue it also skips keys held here.
        const mayTry = state.waiters.head === waiter && (queued || state.held === 0);
        // A grant handed over meanwhile (say, while subscribing) is taken by the wait below.
        if (mayTry && attemptNow && !waiter.granted) {
          // The lean first try is not in the hand-off queue: on success there is nothing to leave.
          // On a key nobody here listens to, it does not join on failure either (a plain SET NX,
          // the cheapest attempt): the retry that follows the subscription joins. On a key heard
          // from lately (contended here), it joins at once.
          const base = !leanTry ? this.#intents.leave : leanJoins ? this.#intents.first : this.#intents.keep;
          const claimToken = state.handOff?.token;
          const intent = claimToken === undefined ? base : { ...base, claimToken };
          leanTry = false;
          let outcome: Acquisition | Miss;
          state.attempting = true;
          lastAttemptAt = performance.now();
          try {
            outcome = await this.#attempt(signal, key, request, intent, owner, probe);
          } catch (error) {
            abandoned = this.#isAbandonment(error, signal);
            throw error;
          } finally {
            state.attempting = false;
          }
          if (outcome instanceof Acquisition) {
            // Whether or not it took a grant to the registration, that registration is spent
            // (and a grant message that arrived meanwhile was for it).
            state.handOff = undefined;
            state.earlyGrant = undefined;
            acquired = true;
            return outcome;
          }
          if (outcome.kind === "held") {
            lastRetryAfter = outcome.retryAfterMs;
            // The key may be granted to this registration (the locker's place in the queue) —
            // perhaps already: a grant's message can outrun the reply of the attempt it names.
            if (outcome.registration !== undefined) state.handOff = outcome.registration;
          }
          this.#settleEarlyGrant(key, state);
        }
        signals ??= [signal, this.#closing.signal];
        if (!waiting) {
          waiting = true;
          this.#waiting += 1;
          state.waitedAt = performance.now();
        }
        if (!subscribed) {
          subscribed = true;
          await abortable(this.#store.watcher.watch(resource), signals);
          // A release may have happened between the failed try and the subscription.
          if (retryAfterSubscribing && state.waiters.head === waiter) {
            attemptNow = true;
            continue;
          }
        }
        backoff ??= new Backoff(this.#options.backoffMin, this.#options.backoffMax);
        // However often grants to others postpone the wait, the head tries again within
        // backoff.max of its last try: that keeps its place in the hand-off queue alive (a place
        // not refreshed within the liveness window is dropped, and the locker would starve).
        const pollBy = lastAttemptAt + this.#options.backoffMax - performance.now();
        const timeout = mayTry
          ? Math.max(1, Math.min(this.#safetyNetDelay(backoff, queued, lastRetryAfter), Math.ceil(pollBy)))
          : undefined;
        const outcome = await waiter.wait(timeout, signals);
        if (outcome === "granted") {
          const granted = await this.#takeGrant(signal, key, waiter, request, owner);
          if (granted !== undefined) {
            acquired = true;
            return granted;
          }
        }
        // "Postponed": another locker was granted the key; keep waiting, poll later.
        attemptNow = outcome !== "postponed";
        if (outcome === "postponed") lastRetryAfter = undefined;
      }
    } finally {
      if (waiting) this.#waiting -= 1;
      // The next waiter here is not in the cross-process queue (a holder's locker leaves it):
      // whoever leaves the head, having taken the key or not, wakes it so that it joins.
      this.#keys.leave(key, state, waiter, !acquired || queued);
      if (subscribed) this.#store.watcher.unwatch(resource);
      if (!acquired && !abandoned && queued && state.waiters.size === 0) {
        void this.#track(this.#store.leaveQueue(resource, this.#waiterId, state.handOff?.token));
        state.handOff = undefined;
      }
      // A grant that arrived during an attempt that then failed or was abandoned: decide now (the
      // next waiter here takes it, or, with nobody left, it is released).
      this.#settleEarlyGrant(key, state);
    }
  }

  /**
   * Waits for permits of a counted lock. Unlike a lock's waiters (whose locker keeps one place in
   * the store's queue, for its head), every waiter of a counted lock has its own place: it tries at
   * once, and its first failed attempt queues it under its own id, so waiters are served in
   * arrival order across processes — readers queued before a writer, in any process, all get in
   * when the writer releases. A grant names the waiter, which then holds its permits at once.
   */
  async #obtainCounted(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition> {
    const state = this.#keys.open(key);
    state.resource ??= this.#store.resourceOf(key);
    const resource = state.resource;
    this.#waiterSeq += 1;
    const waiter = new CountedWaiter(`${this.#waiterId}.${this.#waiterSeq}`);
    state.waiters.push(waiter);
    this.#countedWaiters.set(waiter.id, waiter);
    let acquired = false;
    let abandoned = false;
    let subscribed = false;
    let waiting = false;
    try {
      let attemptNow = true;
      const retryAfterSubscribing = !this.#store.watcher.isWatching(resource);
      let lastRetryAfter: number | undefined;
      let lastAttemptAt = performance.now();
      let backoff: Backoff | undefined;
      let signals: Array<AbortSignal | undefined> | undefined;
      for (;;) {
        if (attemptNow && !waiter.granted) {
          const intent: QueueIntent = {
            waiterId: waiter.id,
            join: true,
            onSuccess: "leave",
            claimToken: waiter.registration?.token,
          };
          let outcome: Acquisition | Miss;
          waiter.attempting = true;
          lastAttemptAt = performance.now();
          try {
            outcome = await this.#attempt(signal, key, request, intent, owner, probe);
          } catch (error) {
            abandoned = this.#isAbandonment(error, signal);
            throw error;
          } finally {
            waiter.attempting = false;
          }
          if (outcome instanceof Acquisition) {
            waiter.registration = undefined;
            waiter.earlyGrant = undefined;
            acquired = true;
            return outcome;
          }
          if (outcome.kind === "held") {
            lastRetryAfter = outcome.retryAfterMs;
            if (outcome.registration !== undefined) waiter.registration = outcome.registration;
          }
          this.#settleCountedGrant(resource, waiter);
        }
        signals ??= [signal, this.#closing.signal];
        if (!waiting) {
          waiting = true;
          this.#waiting += 1;
        }
        if (!subscribed) {
          subscribed = true;
          await abortable(this.#store.watcher.watch(resource), signals);
          if (retryAfterSubscribing && !waiter.granted) {
            attemptNow = true;
            continue;
          }
        }
        backoff ??= new Backoff(this.#options.backoffMin, this.#options.backoffMax);
        // Try again within backoff.max of the last try: that keeps the waiter's place alive.
        const pollBy = lastAttemptAt + this.#options.backoffMax - performance.now();
        const timeout = Math.max(1, Math.min(this.#safetyNetDelay(backoff, true, lastRetryAfter), Math.ceil(pollBy)));
        const outcome = await waiter.wait(timeout, signals);
        if (outcome === "granted") {
          const granted = await this.#takeGrant(signal, key, waiter, request, owner);
          if (granted !== undefined) {
            acquired = true;
            return granted;
          }
        }
        attemptNow = true;
      }
    } finally {
      if (waiting) this.#waiting -= 1;
      this.#countedWaiters.delete(waiter.id);
      this.#keys.leave(key, state, waiter, false);
      if (subscribed) this.#store.watcher.unwatch(resource);
      if (!acquired && !abandoned && waiter.registration !== undefined) {
        // Leaves its place; permits granted to it meanwhile go back (and on to those behind it).
        void this.#track(this.#store.leaveQueue(resource, waiter.id, waiter.registration.token));
        waiter.registration = undefined;
      }
      // A grant that arrived during an attempt that then failed or was abandoned goes back.
      const early = waiter.earlyGrant;
      waiter.earlyGrant = undefined;
      if (early !== undefined && !acquired) this.#onGrant(key, early);
    }
  }

  /** A grant message that arrived during a counted waiter's attempt, acted on once it settled. */
  #settleCountedGrant(resource: string, waiter: CountedWaiter): void {
    const early = waiter.earlyGrant;
    waiter.earlyGrant = undefined;
    if (early !== undefined) this.#onCountedGrant(resource, early);
  }

  /**
   * A release granted permits to the counted waiter named in "g:<id>:<token>:<server ms>": hand
   * them to that waiter if it is still here and the token is its latest registration; otherwise
   * give them back at once (rather than hold them for the grace).
   */
  #onCountedGrant(resource: string, grant: Grant): void {
    const { waiterId, token, serverMs } = grant;
    if (!waiterId.startsWith(`${this.#waiterId}.`)) return;
    const waiter = this.#countedWaiters.get(waiterId);
    if (waiter === undefined) {
      this.#giveBack(token, resource);
      return;
    }
    if (waiter.attempting) {
      waiter.earlyGrant = grant;
      return;
    }
    const registration = waiter.registration;
    if (registration?.token !== token) {
      this.#giveBack(token, resource);
      return;
    }
    waiter.registration = undefined;
    waiter.grant(this.#store.grantedHandle(resource, registration, serverMs));
  }

  /**
   * Acts on a grant message that arrived while the head's attempt was in flight, now that the
   * attempt has settled (and, if it registered, its registration is known).
   */
  #settleEarlyGrant(key: string, state: { earlyGrant: Grant | undefined }): void {
    const early = state.earlyGrant;
    state.earlyGrant = undefined;
    if (early !== undefined) this.#onGrant(key, early);
  }

  /** True when `error` is this call's abort or the locker's close, not a failed attempt. */
  #isAbandonment(error: unknown, signal: AbortSignal | undefined): boolean {
    return (signal?.aborted === true && error === signal.reason) || error === this.#closing.signal.reason;
  }

  /**
   * Turns a grant handed to `waiter` into an acquisition: registers it (its first extension, due at
   * once, lengthens the grant's short TTL) and issues a fencing token when asked. Resolves to
   * undefined when the grant's validity had already run out (it is released; the caller tries).
   */
  async #takeGrant(
    signal: AbortSignal | undefined,
    key: string,
    waiter: Waiter<LockHandle>,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
  ): Promise<Acquisition | undefined> {
    const handle = waiter.takeGrant();
    if (handle === undefined) return undefined;
    if (performance.now() >= handle.validUntil) {
      void this.#track(this.#store.release(handle, true));
      return undefined;
    }
    // Kept (and extended: the grant's TTL is short) from now on, also while its fencing token is
    // on its way: a round trip later would be too late on a slow link.
    const acquisition = this.#register(key, handle, undefined, request, true, owner);
    if (!request.fencing) return acquisition;
    let fencingToken: bigint | undefined;
    try {
      fencingToken = await this.#gate.race(this.#track(this.#store.issueFencingToken(handle)), signal);
    } catch (error) {
      void acquisition.releaser.run();
      throw error;
    }
    // No token means the key vanished meanwhile: not a grant after all.
    if (fencingToken === undefined) {
      void acquisition.releaser.run();
      return undefined;
    }
    acquisition.fencingToken = fencingToken;
    return acquisition;
  }

  /**
   * How long the head waits for a release message before it tries anyway: the safety net for a
   * crashed holder, a grant whose message was lost, or a lost wake-up. With a hand-off queue,
   * releases reliably name the next waiter, so the head polls only when the holder's lease could
   * have run out, and at least every `backoff.max` (which also keeps its place in the queue alive).
   */
  #safetyNetDelay(backoff: Backoff, queued: boolean, retryAfterMs: number | undefined): number {
    if (!queued) return backoff.next();
    const { backoffMax } = this.#options;
    const jitter = Math.random() * Math.min(20, backoffMax / 10);
    return Math.max(1, Math.round(Math.min(backoffMax, retryAfterMs ?? backoffMax) + jitter));
  }

  /**
   * One acquisition attempt (plus its fencing token when asked), abortable: if `signal` aborts or
   * the locker closes while it is in flight, it rejects at once and the attempt is cleaned up
   * once it settles (see {@link #cleanUpAbandoned}). Resolves to the acquisition, or to what the
   * attempt found instead.
   */
  async #attempt(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    intent: QueueIntent,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition | Miss> {
    if (probe !== undefined) probe.attempts += 1;
    const attempt = this.#track(
      this.#store.acquire(
        this.#resourceOf(key),
        request.expiry ?? this.#options.expiry,
        intent,
        request.fencing,
        request.weight,
      ),
    );
    let outcome: AttemptOutcome;
    try {
      outcome = await this.#gate.race(attempt, signal);
    } catch (error) {
      if (this.#isAbandonment(error, signal)) void this.#track(this.#cleanUpAbandoned(attempt, key, intent));
      throw error;
    }
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
   * settled — leaves the hand-off queue (when nobody here waits for the key any more; a grant made
   * to its registration meanwhile is handed over in the same step) and then releases a grant that
   * arrived too late. Both are sent with the script body, in that order, so the release cannot
   * grant the key to this locker after it left.
   */
  async #cleanUpAbandoned(attempt: Promise<AttemptOutcome>, key: string, intent: QueueIntent): Promise<void> {
    const late = await attempt.catch(() => undefined);
    const resource = this.#resourceOf(key);
    // The registration the key may have been granted to: the late attempt's own, else the one it
    // carried.
    const registered = late?.kind === "held" ? late.registration : undefined;
    const state = this.#keys.get(key);
    // A counted lock's waiter has its own entry (its own id): it always leaves.
    const ownEntry = intent.waiterId !== this.#waiterId;
    const leaving =
      intent.join && (ownEntry || (state?.waiters.size ?? 0) === 0)
        ? this.#store.leaveQueue(resource, intent.waiterId, registered?.token ?? intent.claimToken)
        : undefined;
    if (ownEntry) {
      await Promise.all([leaving, late?.kind === "acquired" ? this.#store.release(late.handle, true) : undefined]);
      return;
    }
    if (leaving !== undefined && state !== undefined) state.handOff = undefined;
    if (leaving === undefined && registered !== undefined && state !== undefined) state.handOff = registered;
    const releasing = late?.kind === "acquired" ? this.#store.release(late.handle, true) : undefined;
    await Promise.all([leaving, releasing]);
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
    const acquisition = new Acquisition(owner, key, handle, request.expiry ?? this.#options.expiry, fencingToken);
    if (!request.autoExtend) acquisition.keepAlive = handedOver ? "once" : "never";
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

  /** Releases `acquisition` and publishes what the release found (while anyone listens). */
  async #release(acquisition: Acquisition): Promise<ReleaseOutcome> {
    if (this.#keeper.remove(acquisition)) this.#forget(acquisition);
    acquisition.state = "released";
    const { handle } = acquisition;
    const wasPastDeadline = performance.now() >= handle.validUntil;
    const outcome = await this.#track(this.#store.release(handle));
    // Without a cross-process queue, wake this process's next waiter without waiting for our own
    // message; with one, the release message says whose turn it is — and a release that found
    // nobody queued publishes nothing, so this process's own waiters (not yet in the queue) are
    // woken here.
    if (!this.#store.hasQueue(handle.resource) || handle.handedTo === "" || outcome === "unknown") {
      this.#keys.notifyHead(acquisition.key);
    }
    // A lease left to expire that ran out before its release expired, whoever holds the key now.
    const found = outcome === "taken" && acquisition.keepAlive === "never" && wasPastDeadline ? "expired" : outcome;
    return publishRelease(acquisition.owner, acquisition.key, acquisition.grantedAt, found);
  }

  /**
   * A release granted `resource` to the waiter named in "g:<id>:<token>:<server ms>". Another
   * locker's grant means nothing to try yet. Ours goes to the head of the key's queue — when its
   * token is this locker's latest registration and no attempt is in flight (an attempt sent after
   * the registration takes the granted key itself). Nobody here waiting any more: the key is
   * released at once instead of blocking everyone for the grace.
   */
  #onGrant(key: string, grant: Grant): void {
    const resource = this.#resourceOf(key);
    if (this.#counted) {
      this.#onCountedGrant(resource, grant);
      return;
    }
    if (grant.waiterId !== this.#waiterId) {
      this.#keys.postponeHead(key);
      return;
    }
    const state = this.#keys.get(key);
    const head = state?.waiters.head;
    if (state === undefined || head === undefined) {
      this.#giveBack(grant.token, resource);
      return;
    }
    const registration = state.handOff;
    if (state.attempting) {
      // The attempt in flight either registered this token (the message outran its reply) or will
      // take the key itself (it carries the claim token): decide when its reply is in.
      state.earlyGrant = grant;
      return;
    }
    if (registration?.token !== grant.token) return;
    // Spent: no later attempt of this locker may take the key as "granted to us" again.
    state.handOff = undefined;
    head.grant(this.#store.grantedHandle(resource, registration, grant.serverMs));
  }

  /** Releases a grant nobody here takes, at once, rather than block others for the grace. */
  #giveBack(token: string, resource: string): void {
    if (!this.#closing.signal.aborted)
      void this.#track(this.#store.release(new LockHandle(token, resource, 0, 0), true));
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    this.#inFlight += 1;
    promise.then(this.#settled, this.#settled);
    return promise;
  }

  /** Counts an operation of {@link #track} as settled (one function for all of them). */
  readonly #settled = (): void => {
    this.#inFlight -= 1;
    if (this.#inFlight === 0) this.#drained?.();
  };
}

/** The engine's standing subscription to its own close (see the constructor): nothing to do. */
function ignoreAbort(): void {}

/** A waiter of a counted lock: it has its own place in the store's queue (see `#obtainCounted`). */
class CountedWaiter extends Waiter<LockHandle> {
  /** True while its attempt is in flight. */
  attempting = false;
  /** Its latest registration in the store's queue, not yet seen granted. */
  registration: Registration | undefined;
  /** A grant message that arrived while its attempt was in flight. */
  earlyGrant: Grant | undefined;

  constructor(
    /** Its id in the store's queue: the locker's id, a dot, and a sequence number. */
    readonly id: string,
  ) {
    super();
  }
}
