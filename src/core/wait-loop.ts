import { performance } from "node:perf_hooks";
import { abortable } from "../internal/abortable.js";
import { Backoff } from "../internal/backoff.js";
import { Acquisition } from "./acquisition.js";
import type { AcquireCall, CoreParts, Miss } from "./core-parts.js";
import { DirectWaiter, type DirectWaitShared } from "./direct-waiter.js";
import { GrantDesk } from "./grant-desk.js";
import { type CoreWaiter, CountedWaiter, LockWaiter } from "./waiters.js";

/**
 * The one wait loop: how a `lock`/`acquire` call waits for its key, on every backend.
 *
 * - Every call joins the key's local FIFO queue at once (calls made in the same tick keep their
 *   order); for a lock only the head competes, so one release costs one retry, not a herd.
 * - The head of a queue nobody here holds tries at once, before watching the key (the
 *   uncontended path). After that it waits for the backend's release event, a grant, or its
 *   safety-net timeout (jittered backoff; with a grant queue, the holder's time left), and tries.
 * - An abort or close ends the wait at once; an attempt cut short is cleaned up by the core.
 * - Counted locks (semaphores, read-write locks) give every waiter its own place in the store's
 *   queue, so waiters are served in arrival order across processes — readers queued before a
 *   writer, in any process, all get in when the writer releases. A grant names the waiter.
 *
 * What differs between a lock's waiters and a counted lock's is said once, in their classes
 * ({@link LockWaiter}, {@link CountedWaiter}); the loop is the same.
 */
export class WaitLoop {
  readonly #parts: CoreParts;
  /** The grants a backend's grant queue makes to this core's waiters. */
  readonly grants: GrantDesk;
  /** Callers whose first attempt failed (or who queued behind others), still waiting. */
  readonly #count = { waiting: 0 };
  /** What this core's direct waiters share (a store in this process: see {@link DirectWaiter}). */
  readonly #direct: DirectWaitShared;
  #waiterSeq = 0;

  constructor(parts: CoreParts) {
    this.grants = new GrantDesk(parts);
    this.#parts = parts;
    this.#direct = { parts, desk: this.grants, count: this.#count };
  }

  /** Number of calls waiting: queued behind others, or after a failed attempt. */
  get waiting(): number {
    return this.#count.waiting;
  }

  /**
   * Waits for a lock's key of a store in this process, without the loop (see {@link DirectWaiter}):
   * the release that grants the key hands the acquisition over, as `deliver` makes it. Returns it
   * at once when the first try takes the key.
   */
  obtainNow<T>(call: AcquireCall, deliver: (acquisition: Acquisition) => T): Promise<T> | T {
    return DirectWaiter.obtain(this.#direct, call, deliver);
  }

  /**
   * Waits in the key's local FIFO queue until an attempt succeeds, the signal aborts, or close.
   * Every call joins the queue at once, so calls made in the same tick keep their order. The head
   * of a queue nobody here holds tries at once, before subscribing (the uncontended path); after
   * that, it waits for a release message or its safety-net timeout between attempts. A waiter of a
   * counted lock tries at once, and its first failed attempt queues it under its own id. Resolves
   * to what `deliver` makes of the acquisition (a lock's caller: its release function), made here
   * rather than in a reaction of the caller's: a hand-off's waiter resumes one reaction sooner.
   */
  async obtain<T>(call: AcquireCall, deliver: (acquisition: Acquisition) => T): Promise<T> {
    const parts = this.#parts;
    const { signal, key } = call;
    const state = parts.keys.open(key);
    state.resource ??= parts.store.resourceOf(key);
    const resource = state.resource;
    const waiter: CoreWaiter = parts.counted ? this.#countedWaiter() : new LockWaiter();
    state.waiters.push(waiter);
    /** Where this waiter's attempts register: the locker's place for the key, or its own. */
    const place = waiter.placeIn(state);
    const queued = waiter.queued(parts.store, resource);
    let acquired = false;
    /** An attempt was cut short in flight: its own clean-up leaves the grant queue. */
    let abandoned = false;
    /** An attempt failed in flight (it timed out, say): it may have joined the queue all the same. */
    let failed = false;
    let subscribed = false;
    /** Counted in `waitingCount` (from its first wait on). */
    let waiting = false;
    try {
      // The lean first try (a lock's head): nobody here holds or waits for the key. A head behind
      // this locker's own holder tries at once too (with a grant queue): it fails, but takes the
      // locker's place in the queue now rather than at its first poll — other processes' waiters
      // would be served ahead of it meanwhile. A counted waiter always tries at once.
      const isFirst = waiter.isFirst(state);
      let leanTry = waiter.leanFirstTry && isFirst && state.held === 0;
      let attemptNow = leanTry || (isFirst && queued);
      const listening = parts.store.watcher.isWatching(resource);
      // The lean try joins the queue on failure only on a key that had a waiter here lately (it is
      // likely to fail); elsewhere it is a plain SET NX, and a failure joins at the retry below.
      // (A key never waited for here skips the clock: the uncontended path reads it less.)
      const leanJoins =
        leanTry &&
        queued &&
        listening &&
        state.waitedAt !== Number.NEGATIVE_INFINITY &&
        performance.now() - state.waitedAt < parts.options.backoffMax;
      // If the channel was already confirmed before that try, no release can have slipped by.
      // Otherwise one may have, between the failed first try and the subscription (its message,
      // or its grant to this locker, then reached nobody): try once more after subscribing. That
      // holds for a first try behind this locker's own holder as much as for the lean one.
      const retryAfterSubscribing = !listening || (leanTry && !(leanJoins || !queued));
      let lastRetryAfter: number | undefined;
      /**
       * When this waiter last tried (which also refreshed its liveness in the grant queue); until
       * it has, when it began to wait (read then: the uncontended path reads the clock once less).
       */
      let lastAttemptAt: number | undefined;
      let backoff: Backoff | undefined;
      let signals: Array<AbortSignal | undefined> | undefined;
      for (;;) {
        // Only the first competes; without a cross-process queue a lock also skips keys held here.
        const mayTry = waiter.isFirst(state) && (queued || state.held === 0);
        // A grant handed over meanwhile (say, while subscribing) is taken by the wait below.
        if (mayTry && attemptNow && !waiter.granted) {
          // The lean first try is not in the grant queue: on success there is nothing to leave.
          // On a key nobody here listens to, it does not join on failure either (a plain SET NX,
          // the cheapest attempt): the retry that follows the subscription joins. On a key heard
          // from lately (contended here), it joins at once.
          const base = !leanTry
            ? waiter.joinQueueing(parts)
            : leanJoins
              ? parts.attempts.joinAndStay
              : parts.attempts.outside;
          const grantedToken = place.registration?.token;
          const queueing = grantedToken === undefined ? base : { ...base, grantedToken };
          leanTry = false;
          let outcome: Acquisition | Miss;
          place.attempting = true;
          try {
            outcome = await parts.attempts.attempt(call, queueing);
          } catch (error) {
            abandoned = parts.lifetime.isAbandonment(error, signal);
            failed = !abandoned;
            throw error;
          } finally {
            place.attempting = false;
          }
          if (outcome instanceof Acquisition) {
            // Whether or not it took a grant to the registration, that registration is spent
            // (and a grant message that arrived meanwhile was for it).
            place.registration = undefined;
            place.earlyGrant = undefined;
            acquired = true;
            return deliver(outcome);
          }
          // When it tried, read only on a miss (a win needs no poll): when the attempt that holds
          // its place in the queue was sent, else now, after the reply. That is later than the
          // send by the attempt's round trip, which a queue's liveness window leaves room for
          // (Redis: 3 × backoff.max + operationTimeout, polled within backoff.max).
          const registration = outcome.kind === "held" ? outcome.registration : undefined;
          lastAttemptAt = registration === undefined ? performance.now() : registration.sentAt;
          if (outcome.kind === "held") {
            lastRetryAfter = outcome.retryAfterMs;
            // The key may be granted to this registration (the place in the queue) — perhaps
            // already: a grant's message can outrun the reply of the attempt it names.
            if (registration !== undefined) place.registration = registration;
          }
          this.grants.settleEarlyGrant(key, place);
        }
        signals ??= [signal, parts.lifetime.closing];
        if (!waiting) {
          waiting = true;
          this.#count.waiting += 1;
          state.waitedAt = performance.now();
          lastAttemptAt ??= state.waitedAt;
        }
        if (!subscribed) {
          subscribed = true;
          await abortable(parts.store.watcher.watch(resource), signals);
          // A release may have happened between the failed try and the subscription.
          if (retryAfterSubscribing && waiter.isFirst(state)) {
            attemptNow = true;
            continue;
          }
        }
        backoff ??= new Backoff(parts.options.backoffMin, parts.options.backoffMax);
        // However often grants to others postpone the wait, the first tries again within
        // backoff.max of its last try: that keeps its place in the grant queue alive (a place
        // not refreshed within the liveness window is dropped, and the waiter would starve).
        const pollBy = (lastAttemptAt ?? state.waitedAt) + parts.options.backoffMax - performance.now();
        const timeout = mayTry
          ? Math.max(1, Math.min(this.#safetyNetDelay(backoff, queued, lastRetryAfter), Math.ceil(pollBy)))
          : undefined;
        const outcome = await waiter.wait(timeout, signals);
        if (outcome === "granted") {
          const taken = this.grants.takeGrant(call, waiter);
          const granted = taken instanceof Promise ? await taken : taken;
          if (granted !== undefined) {
            acquired = true;
            return deliver(granted);
          }
        }
        // "Postponed" (locks): another locker was granted the key; keep waiting, poll later.
        attemptNow = outcome !== "postponed";
        if (outcome === "postponed") lastRetryAfter = undefined;
      }
    } finally {
      if (waiting) this.#count.waiting -= 1;
      // A grant handed to it that it never took: its caller gave up (or the locker closed) before
      // it waited again.
      const unused = acquired ? undefined : waiter.takeGrant();
      waiter.leave(parts, key, state, acquired, queued);
      if (subscribed) parts.store.watcher.unwatch(resource);
      if (unused !== undefined) this.grants.passOn(state, waiter, unused);
      else if (!acquired && !abandoned && waiter.leavesPlace(state, queued, failed)) {
        void parts.lifetime.track(
          parts.store.leaveQueue(resource, waiter.joinQueueing(parts).waiterId, place.registration?.token),
        );
        place.registration = undefined;
      }
      // A grant that arrived during an attempt that then failed or was abandoned: decide now (a
      // lock's next waiter here takes it; with nobody left to take it, it goes back).
      this.grants.settleEarlyGrant(key, place);
      if (acquired && !parts.counted) parts.keys.settle(key, state);
    }
  }

  /** A fresh waiter of a counted lock, known to the grant desk by its own id. */
  #countedWaiter(): CountedWaiter {
    this.#waiterSeq += 1;
    const seq = this.#waiterSeq;
    return new CountedWaiter(`${this.#parts.waiterId}.${seq}`, seq);
  }

  /**
   * How long the head waits for a release message before it tries anyway: the safety net for a
   * crashed holder, a grant whose message was lost, or a lost wake-up. With a grant queue,
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
