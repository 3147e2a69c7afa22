import { performance } from "node:perf_hooks";
import type { LockHandle } from "../backend.js";
import { type AbortSubscription, subscribeAbort } from "../internal/abortable.js";
import { type KeyState, type KeyStates, Waiter } from "../internal/waiter.js";
import { Acquisition } from "./acquisition.js";
import type { AcquireCall, CoreParts, Miss } from "./core-parts.js";
import type { GrantDesk } from "./grant-desk.js";

/** What the direct waiters of one core share (made once, by its wait loop). */
export interface DirectWaitShared {
  readonly parts: CoreParts;
  readonly desk: GrantDesk;
  /** How many callers wait, shared with the wait loop (one `waitingCount`). */
  readonly count: { waiting: number };
}

/**
 * A lock's caller waiting for a key of a store in this process (memory), without the wait loop.
 *
 * It waits in the key's local FIFO like the loop's waiters. As its head it holds the locker's place
 * in the store's queue, and the release that grants the key hands it over in the same step: the
 * grant is registered and the caller's promise resolved with its acquisition — no wake-up, retry,
 * timer or poll (the store answers at once and reports every grant; it needs no safety net). The
 * key freed without a grant to it (an expiry, a loss, the head ahead leaving) makes it try at once.
 * An abort or close (see {@link closeAll}) rejects it and leaves nothing behind: the next waiter here is woken, and the
 * locker's place in the store's queue is left once nobody here waits.
 */
export class DirectWaiter<T = Acquisition> extends Waiter {
  readonly #shared: DirectWaitShared;
  readonly #call: AcquireCall;
  readonly #state: KeyState;
  /** What its caller is handed for the acquisition (a lock's caller: its release function). */
  readonly #deliver: (acquisition: Acquisition) => T;
  /** Set once it has its acquisition (or its error): it left the FIFO then. */
  #settled = false;
  /** Its outcome while nobody waits on its promise yet (the first try settled it). */
  #outcome: Acquisition | undefined;
  #error: unknown;
  #resolve: ((delivered: T) => void) | undefined;
  #reject: ((reason: unknown) => void) | undefined;
  #onSignal: AbortSubscription | undefined;
  /** True during its own attempt; a notification meanwhile makes it try once more. */
  #trying = false;
  #again = false;

  private constructor(
    shared: DirectWaitShared,
    call: AcquireCall,
    state: KeyState,
    deliver: (acquisition: Acquisition) => T,
  ) {
    super();
    this.#shared = shared;
    this.#call = call;
    this.#state = state;
    this.#deliver = deliver;
  }

  /**
   * Waits for `call`'s key: joins its FIFO, tries at once when first, and returns what `deliver`
   * makes of the acquisition when that try took the key, else a promise of it (counted in `shared.count`
   * while it waits). The promise resolves with `deliver`'s value itself: a lock's caller, handed
   * its release function, resumes one reaction after the grant, not two.
   */
  static obtain<T>(
    shared: DirectWaitShared,
    call: AcquireCall,
    deliver: (acquisition: Acquisition) => T,
  ): Promise<T> | T {
    const { parts } = shared;
    const state = parts.keys.open(call.key);
    state.resource ??= parts.store.resourceOf(call.key);
    const waiter = new DirectWaiter(shared, call, state, deliver);
    state.waiters.push(waiter);
    if (state.waiters.head === waiter) waiter.#try();
    if (waiter.#settled) {
      if (waiter.#outcome !== undefined) return deliver(waiter.#outcome);
      throw waiter.#error;
    }
    return waiter.#wait();
  }

  /**
   * The locker is closing: rejects every waiter of `keys` with `reason` (the locker's standing
   * subscription to its close calls this, so that waiters need no subscription of their own).
   */
  static closeAll(keys: KeyStates, reason: unknown): void {
    for (const waiter of keys.waiters()) if (waiter instanceof DirectWaiter) waiter.#fail(reason);
  }

  /** Counts it as waiting and listens for an abort of its signal until it settles. */
  #wait(): Promise<T> {
    this.#shared.count.waiting += 1;
    const promise = new Promise<T>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    const { signal } = this.#call;
    if (signal !== undefined) this.#onSignal = subscribeAbort(signal, (reason) => this.#fail(reason));
    return promise;
  }

  /**
   * The head ahead left, or the key was freed without a grant: try now (first in line only; not
   * once the locker is closing, which rejects every waiter).
   */
  override notify(): void {
    if (this.#settled || this.#state.waiters.head !== this || this.#shared.parts.lifetime.closing.aborted) return;
    if (this.#trying) this.#again = true;
    else this.#try();
  }

  /** Another locker was granted the key: nothing to do (it waits for its own grant). */
  override postpone(): void {}

  /** The store's queue granted the key to this locker's place, which this head holds: take it. */
  override grant(handle: LockHandle): void {
    const { store, holdings } = this.#shared.parts;
    // A lease held until released (most) cannot have run out: no clock to read.
    if (handle.validUntil !== Number.POSITIVE_INFINITY && performance.now() >= handle.validUntil) {
      void this.#shared.parts.lifetime.track(store.release(handle, true));
      this.notify();
      return;
    }
    const acquisition = holdings.registerGrant(this.#call, handle);
    if (this.#call.request.fencing) {
      const fencingToken = store.inProcess?.issueFencingTokenNow(handle);
      // No token: the key vanished meanwhile, so this was no grant after all; try again.
      if (fencingToken === undefined) {
        void acquisition.releaser.run();
        this.notify();
        return;
      }
      acquisition.fencingToken = fencingToken;
    }
    this.#succeed(acquisition);
  }

  /** One attempt, answered at once; it joins the store's queue (under the locker's place) on a miss. */
  #try(): void {
    const parts = this.#shared.parts;
    const state = this.#state;
    do {
      this.#again = false;
      const grantedToken = state.registration?.token;
      const queueing = grantedToken === undefined ? parts.attempts.join : { ...parts.attempts.join, grantedToken };
      let outcome: Acquisition | Miss | undefined;
      let failure: { error: unknown } | undefined;
      this.#trying = true;
      state.attempting = true;
      try {
        outcome = parts.attempts.attemptNow(this.#call, queueing);
      } catch (error) {
        failure = { error };
      }
      state.attempting = false;
      this.#trying = false;
      if (outcome === undefined) {
        this.#fail(failure?.error);
        return;
      }
      if (outcome instanceof Acquisition) {
        // Whether or not it took a grant to the registration, that registration is spent (and a
        // grant reported meanwhile was for it).
        state.registration = undefined;
        state.earlyGrant = undefined;
        this.#succeed(outcome);
        return;
      }
      if (outcome.kind === "held" && outcome.registration !== undefined) state.registration = outcome.registration;
      // A grant reported during the attempt: for this registration (taken now) or an older one.
      this.#shared.desk.settleEarlyGrant(this.#call.key, state);
    } while (this.#again && !this.#settled);
  }

  #succeed(acquisition: Acquisition): void {
    this.#settle(true);
    if (this.#resolve === undefined) this.#outcome = acquisition;
    else this.#resolve(this.#deliver(acquisition));
  }

  /** Aborted, closed, or its attempt failed: leaves with nothing. */
  #fail(reason: unknown): void {
    if (this.#settled) return;
    this.#settle(false);
    if (this.#reject === undefined) this.#error = reason;
    else this.#reject(reason);
  }

  /**
   * Leaves the FIFO (waking the next waiter here, which then holds the locker's place) and stops
   * listening; the last waiter here to leave without the key leaves the store's queue too.
   */
  #settle(acquired: boolean): void {
    this.#settled = true;
    const parts = this.#shared.parts;
    const state = this.#state;
    const { key } = this.#call;
    if (this.#resolve !== undefined) this.#shared.count.waiting -= 1;
    this.#onSignal?.cancel();
    parts.keys.leave(key, state, this, true);
    if (!acquired && state.waiters.size === 0) {
      void parts.lifetime.track(
        parts.store.leaveQueue(
          state.resource ?? parts.store.resourceOf(key),
          parts.waiterId,
          state.registration?.token,
        ),
      );
      state.registration = undefined;
    }
    // A grant reported during an attempt that then failed: the next waiter here takes it (with
    // nobody left, it goes back).
    this.#shared.desk.settleEarlyGrant(key, state);
  }
}
