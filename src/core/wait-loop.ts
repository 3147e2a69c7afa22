import { performance } from "node:perf_hooks";
import { abortable } from "../internal/abortable.js";
import { Backoff } from "../internal/backoff.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import type { ResolvedAcquireOptions } from "../internal/validate.js";
import { Waiter } from "../internal/waiter.js";
import { Acquisition, type AcquisitionOwner } from "./acquisition.js";
import type { LockHandle, QueueIntent } from "./backend.js";
import { type CoreParts, CountedWaiter, type Miss } from "./core-parts.js";
import type { GrantDesk } from "./grant-desk.js";

/**
 * The one wait loop: how a `lock`/`acquire` call waits for its key, on every backend.
 *
 * - Every call joins the key's local FIFO queue at once (calls made in the same tick keep their
 *   order); for a lock only the head competes, so one release costs one retry, not a herd.
 * - The head of a queue nobody here holds tries at once, before watching the key (the
 *   uncontended path). After that it waits for the backend's release event, a grant, or its
 *   safety-net timeout (jittered backoff; with a hand-off queue, the holder's time left), and tries.
 * - An abort or close ends the wait at once; an attempt cut short is cleaned up by the core.
 * - Counted locks (semaphores, read-write locks) give every waiter its own place in the store's
 *   queue, so waiters are served in arrival order across processes.
 */
export class WaitLoop {
  readonly #parts: CoreParts;
  readonly #grants: GrantDesk;
  /** Callers whose first attempt failed (or who queued behind others), still waiting. */
  #waiting = 0;
  #waiterSeq = 0;

  constructor(parts: CoreParts, grants: GrantDesk) {
    this.#parts = parts;
    this.#grants = grants;
  }

  /** Number of calls waiting: queued behind others, or after a failed attempt. */
  get waiting(): number {
    return this.#waiting;
  }

  /**
   * Waits in the key's local FIFO queue until an attempt succeeds, the signal aborts, or close.
   * Every call joins the queue at once, so calls made in the same tick keep their order. The head
   * of a queue nobody here holds tries at once, before subscribing (the uncontended path); after
   * that, it waits for a release message or its safety-net timeout between attempts.
   */
  async obtain(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition> {
    const state = this.#parts.keys.open(key);
    state.resource ??= this.#parts.store.resourceOf(key);
    const resource = state.resource;
    const waiter = new Waiter<LockHandle>();
    state.waiters.push(waiter);
    const queued = this.#parts.store.hasQueue(resource);
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
      const listening = this.#parts.store.watcher.isWatching(resource);
      // The lean try joins the queue on failure only on a key that had a waiter here lately (it is
      // likely to fail); elsewhere it is a plain SET NX, and a failure joins at the retry below.
      // (A key never waited for here skips the clock: the uncontended path reads it less.)
      const leanJoins =
        leanTry &&
        queued &&
        listening &&
        state.waitedAt !== Number.NEGATIVE_INFINITY &&
        performance.now() - state.waitedAt < this.#parts.options.backoffMax;
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
          const base = !leanTry
            ? this.#parts.intents.leave
            : leanJoins
              ? this.#parts.intents.first
              : this.#parts.intents.keep;
          const claimToken = state.handOff?.token;
          const intent = claimToken === undefined ? base : { ...base, claimToken };
          leanTry = false;
          let outcome: Acquisition | Miss;
          state.attempting = true;
          lastAttemptAt = performance.now();
          try {
            outcome = await this.#parts.attempt(signal, key, request, intent, owner, probe);
          } catch (error) {
            abandoned = this.#parts.isAbandonment(error, signal);
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
          this.#grants.settleEarlyGrant(key, state);
        }
        signals ??= [signal, this.#parts.closing];
        if (!waiting) {
          waiting = true;
          this.#waiting += 1;
          state.waitedAt = performance.now();
        }
        if (!subscribed) {
          subscribed = true;
          await abortable(this.#parts.store.watcher.watch(resource), signals);
          // A release may have happened between the failed try and the subscription.
          if (retryAfterSubscribing && state.waiters.head === waiter) {
            attemptNow = true;
            continue;
          }
        }
        backoff ??= new Backoff(this.#parts.options.backoffMin, this.#parts.options.backoffMax);
        // However often grants to others postpone the wait, the head tries again within
        // backoff.max of its last try: that keeps its place in the hand-off queue alive (a place
        // not refreshed within the liveness window is dropped, and the locker would starve).
        const pollBy = lastAttemptAt + this.#parts.options.backoffMax - performance.now();
        const timeout = mayTry
          ? Math.max(1, Math.min(this.#safetyNetDelay(backoff, queued, lastRetryAfter), Math.ceil(pollBy)))
          : undefined;
        const outcome = await waiter.wait(timeout, signals);
        if (outcome === "granted") {
          const granted = await this.#grants.takeGrant(signal, key, waiter, request, owner);
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
      this.#parts.keys.leave(key, state, waiter, !acquired || queued);
      if (subscribed) this.#parts.store.watcher.unwatch(resource);
      if (!acquired && !abandoned && queued && state.waiters.size === 0) {
        void this.#parts.track(this.#parts.store.leaveQueue(resource, this.#parts.waiterId, state.handOff?.token));
        state.handOff = undefined;
      }
      // A grant that arrived during an attempt that then failed or was abandoned: decide now (the
      // next waiter here takes it, or, with nobody left, it is released).
      this.#grants.settleEarlyGrant(key, state);
    }
  }

  /**
   * Waits for permits of a counted lock. Unlike a lock's waiters (whose locker keeps one place in
   * the store's queue, for its head), every waiter of a counted lock has its own place: it tries at
   * once, and its first failed attempt queues it under its own id, so waiters are served in
   * arrival order across processes — readers queued before a writer, in any process, all get in
   * when the writer releases. A grant names the waiter, which then holds its permits at once.
   */
  async obtainCounted(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition> {
    const state = this.#parts.keys.open(key);
    state.resource ??= this.#parts.store.resourceOf(key);
    const resource = state.resource;
    this.#waiterSeq += 1;
    const waiter = new CountedWaiter(`${this.#parts.waiterId}.${this.#waiterSeq}`);
    state.waiters.push(waiter);
    this.#parts.countedWaiters.set(waiter.id, waiter);
    let acquired = false;
    let abandoned = false;
    let subscribed = false;
    let waiting = false;
    try {
      let attemptNow = true;
      const retryAfterSubscribing = !this.#parts.store.watcher.isWatching(resource);
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
            outcome = await this.#parts.attempt(signal, key, request, intent, owner, probe);
          } catch (error) {
            abandoned = this.#parts.isAbandonment(error, signal);
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
          this.#grants.settleCountedGrant(resource, waiter);
        }
        signals ??= [signal, this.#parts.closing];
        if (!waiting) {
          waiting = true;
          this.#waiting += 1;
        }
        if (!subscribed) {
          subscribed = true;
          await abortable(this.#parts.store.watcher.watch(resource), signals);
          if (retryAfterSubscribing && !waiter.granted) {
            attemptNow = true;
            continue;
          }
        }
        backoff ??= new Backoff(this.#parts.options.backoffMin, this.#parts.options.backoffMax);
        // Try again within backoff.max of the last try: that keeps the waiter's place alive.
        const pollBy = lastAttemptAt + this.#parts.options.backoffMax - performance.now();
        const timeout = Math.max(1, Math.min(this.#safetyNetDelay(backoff, true, lastRetryAfter), Math.ceil(pollBy)));
        const outcome = await waiter.wait(timeout, signals);
        if (outcome === "granted") {
          const granted = await this.#grants.takeGrant(signal, key, waiter, request, owner);
          if (granted !== undefined) {
            acquired = true;
            return granted;
          }
        }
        attemptNow = true;
      }
    } finally {
      if (waiting) this.#waiting -= 1;
      this.#parts.countedWaiters.delete(waiter.id);
      this.#parts.keys.leave(key, state, waiter, false);
      if (subscribed) this.#parts.store.watcher.unwatch(resource);
      if (!acquired && !abandoned && waiter.registration !== undefined) {
        // Leaves its place; permits granted to it meanwhile go back (and on to those behind it).
        void this.#parts.track(this.#parts.store.leaveQueue(resource, waiter.id, waiter.registration.token));
        waiter.registration = undefined;
      }
      // A grant that arrived during an attempt that then failed or was abandoned goes back.
      const early = waiter.earlyGrant;
      waiter.earlyGrant = undefined;
      if (early !== undefined && !acquired) this.#grants.onGrant(key, early);
    }
  }

  /**
   * How long the head waits for a release message before it tries anyway: the safety net for a
   * crashed holder, a grant whose message was lost, or a lost wake-up. With a hand-off queue,
   * releases reliably name the next waiter, so the head polls only when the holder's lease could
   * have run out, and at least every `backoff.max` (which also keeps its place in the queue alive).
   */
  #safetyNetDelay(backoff: Backoff, queued: boolean, retryAfterMs: number | undefined): number {
    // Without a queue, a store's hint (the holder's deadline) caps the backoff: a stopped holder
    // is taken over then, not a backoff later.
    if (!queued) return Math.max(1, Math.min(backoff.next(), retryAfterMs ?? Number.POSITIVE_INFINITY));
    const { backoffMax } = this.#parts.options;
    const jitter = Math.random() * Math.min(20, backoffMax / 10);
    return Math.max(1, Math.round(Math.min(backoffMax, retryAfterMs ?? backoffMax) + jitter));
  }
}
