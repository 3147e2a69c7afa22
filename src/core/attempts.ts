import type { AttemptOutcome, AttemptRequest, Queueing } from "../backend.js";
import type { KeyStates } from "../internal/waiter.js";
import { Acquisition } from "./acquisition.js";
import type { AcquireCall, CoreSettings, Miss } from "./core-parts.js";
import type { Holdings } from "./holdings.js";
import type { Lifetime } from "./lifetime.js";
import type { Store } from "./store.js";

/** How often a `tryLock` asks again after its win was read only once the lease had run out. */
const LATE_ANSWER_RETRIES = 3;

/**
 * One acquisition attempt and what follows it: the request sent to the store, the grant registered
 * as an acquisition, and the clean-up of an attempt its caller abandoned while it was in flight
 * (an abort, or close): it leaves the store's queue and gives back a grant that came too late.
 */
export class Attempts {
  readonly #settings: CoreSettings;
  readonly #store: Store;
  readonly #keys: KeyStates;
  readonly #lifetime: Lifetime;
  readonly #holdings: Holdings;
  /** This locker's id in the store's queues. */
  readonly #waiterId: string;
  /**
   * Per key, the clean-up of attempts abandoned in flight: until it ran, such an attempt may have
   * left a queue entry in the store, which a `tryObtain` of the key lets finish first (an aborted
   * waiter never makes the next `tryLock` miss).
   */
  readonly #abandoned = new Map<string, Promise<void>>();
  /** A waiter's attempts: join the queue on a miss, leave it on success. */
  readonly join: Queueing;
  /** The lean first try on a key contended lately: join on a miss, and stay queued on success. */
  readonly joinAndStay: Queueing;
  /** An attempt that does not queue (`tryLock`, the lean first try). */
  readonly outside: Queueing;

  constructor(
    settings: CoreSettings,
    store: Store,
    keys: KeyStates,
    lifetime: Lifetime,
    holdings: Holdings,
    waiterId: string,
  ) {
    this.#settings = settings;
    this.#store = store;
    this.#keys = keys;
    this.#lifetime = lifetime;
    this.#holdings = holdings;
    this.#waiterId = waiterId;
    this.join = { waiterId, joinOnMiss: true, leaveOnSuccess: true };
    this.joinAndStay = { waiterId, joinOnMiss: true, leaveOnSuccess: false };
    this.outside = { waiterId, joinOnMiss: false, leaveOnSuccess: false };
  }

  /**
   * One attempt of `call` (plus its fencing token when asked), abortable: if its signal aborts or
   * the locker closes while it is in flight, it rejects at once and the attempt is cleaned up once
   * it settles. Resolves to the acquisition, or to what the attempt found instead.
   */
  attempt(call: AcquireCall, queueing: Queueing): Promise<Acquisition | Miss> | Acquisition | Miss {
    if (this.#store.inProcess !== undefined) return this.attemptNow(call, queueing);
    if (call.probe !== undefined) call.probe.attempts += 1;
    const sent = this.#store.acquire(this.#requestOf(call, queueing));
    return this.#inFlight(call, queueing, sent);
  }

  /** {@link attempt} on a store in this process, which answers at once: nothing to race or clean up. */
  attemptNow(call: AcquireCall, queueing: Queueing): Acquisition | Miss {
    const inProcess = this.#store.inProcess;
    if (inProcess === undefined) throw new TypeError("The store answers attempts asynchronously");
    if (call.probe !== undefined) call.probe.attempts += 1;
    this.#lifetime.gate.check(call.signal);
    return this.#settle(inProcess.acquireNow(this.#requestOf(call, queueing)), call);
  }

  /** One attempt on `call`'s key, not queued: the acquisition, or undefined when it is taken. */
  async tryOnce(call: AcquireCall): Promise<Acquisition | undefined> {
    const abandoned = this.#abandoned.size === 0 ? undefined : this.#abandoned.get(call.key);
    if (abandoned !== undefined) await this.#lifetime.gate.race(abandoned, call.signal);
    for (let late = 0; ; late++) {
      const outcome = await this.attempt(call, this.outside);
      if (outcome instanceof Acquisition) return outcome;
      // "expired-on-arrival": the key was free and taken for us, but this process read the answer
      // only after the lease had run out (a burst or a pause stalled it). That is no "held
      // elsewhere": ask again, a few times, rather than answer false for a free key.
      if (outcome.kind !== "expired-on-arrival" || late === LATE_ANSWER_RETRIES) return undefined;
    }
  }

  /** What the store is asked for by one attempt of `call`. */
  #requestOf(call: AcquireCall, queueing: Queueing): AttemptRequest {
    const { request } = call;
    return {
      resource: this.#store.resourceOf(call.key),
      duration: request.expiry ?? this.#settings.expiry,
      queueing,
      fencing: request.fencing,
      weight: request.weight,
    };
  }

  /** The rest of {@link attempt} for a store that answers asynchronously. */
  async #inFlight(call: AcquireCall, queueing: Queueing, sent: Promise<AttemptOutcome>): Promise<Acquisition | Miss> {
    const lifetime = this.#lifetime;
    let outcome: AttemptOutcome;
    try {
      outcome = await lifetime.gate.race(sent, call.signal, lifetime.inFlight);
    } catch (error) {
      if (lifetime.isAbandonment(error, call.signal))
        this.#noteAbandoned(call.key, this.#cleanUp(sent, call.key, queueing));
      throw error;
    }
    return this.#settle(outcome, call);
  }

  /** An attempt's answer: the acquisition it made (registered), or what it found instead. */
  #settle(outcome: AttemptOutcome, call: AcquireCall): Acquisition | Miss {
    if (outcome.kind !== "acquired") return outcome;
    if (call.request.fencing && outcome.fencingToken === undefined) {
      // Only a store without fencing could answer so; checkFencing refused that up front.
      void this.#lifetime.track(this.#store.release(outcome.handle, true));
      return { kind: "expired-on-arrival" };
    }
    return this.#holdings.register(call.key, outcome.handle, outcome.fencingToken, call.request, false, call.owner);
  }

  /**
   * After an attempt that was abandoned in flight has settled — including a retry after a flushed
   * script cache, sent after everything sent before it settled — leaves the store's queue (when
   * nobody here waits for the key any more; a grant made to its registration meanwhile is handed
   * over in the same step) and then releases a grant that arrived too late. Both are clean-ups
   * (see `Backend.release`), in that order, so the release cannot grant the key to this locker
   * after it left.
   */
  async #cleanUp(attempt: Promise<AttemptOutcome>, key: string, queueing: Queueing): Promise<void> {
    const late = await attempt.catch(() => undefined);
    const resource = this.#store.resourceOf(key);
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
    const releasing = late?.kind === "acquired" ? this.#holdings.releaseLate(key, late.handle) : undefined;
    if (!ownEntry && state !== undefined) {
      if (leaving !== undefined) state.registration = undefined;
      // The late registration is the locker's latest unless a later attempt has answered since
      // (the store keeps one per locker, and ran that attempt after this one).
      else if (registered !== undefined && state.registration?.token === queueing.grantedToken) {
        state.registration = registered;
      }
    }
    await Promise.all([leaving, releasing]);
  }

  /** Tracks the clean-up of an abandoned attempt on `key` (see {@link #abandoned}) until it settles. */
  #noteAbandoned(key: string, cleanUp: Promise<void>): void {
    const all = Promise.all([this.#abandoned.get(key), this.#lifetime.track(cleanUp)]).then(
      () => undefined,
      () => undefined,
    );
    this.#abandoned.set(key, all);
    void all.then(() => {
      if (this.#abandoned.get(key) === all) this.#abandoned.delete(key);
    });
  }
}
