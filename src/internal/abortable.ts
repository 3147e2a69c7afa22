/**
 * Abort handling that adds at most ONE 'abort' listener to any signal, however many calls wait
 * on it: a request-scoped signal shared by hundreds of concurrent `lock` calls must not trip
 * Node's MaxListenersExceededWarning (11 listeners). Each signal gets a hub, which listens once and
 * fans the abort out to its subscribers, kept in an intrusive doubly-linked list (O(1) subscribe
 * and cancel, no allocation besides the subscription itself). The hub's listener is removed, and
 * the hub forgotten, as soon as its last subscriber cancels: nothing is left on the signal.
 */

import { IntrusiveList, type Linked } from "./intrusive-list.js";

/** A subscription to a signal's abort; see {@link subscribeAbort}. */
export interface AbortSubscription {
  /** Stops the subscription (idempotent; harmless after it fired, or while the hub fans out). */
  cancel(): void;
}

/** The one hub of each signal that has subscribers (at most one listener per signal). */
const hubs = new WeakMap<AbortSignal, AbortHub>();

/** One subscriber of a hub, linked in place. */
class Subscriber implements AbortSubscription, Linked<Subscriber> {
  prev: Subscriber | undefined;
  next: Subscriber | undefined;
  /** The hub this subscriber is linked into; `undefined` once it fired or was cancelled. */
  list: IntrusiveList<Subscriber> | undefined;
  readonly callback: (reason: unknown) => void;

  constructor(callback: (reason: unknown) => void) {
    this.callback = callback;
  }

  cancel(): void {
    if (this.list instanceof AbortHub) this.list.leave(this);
  }
}

/**
 * Listens once on its signal and calls every subscriber, in subscription order, on abort. The hub
 * is itself the list of its subscribers.
 */
class AbortHub extends IntrusiveList<Subscriber> {
  readonly #signal: AbortSignal;
  readonly #listener = (): void => this.#fire();

  constructor(signal: AbortSignal) {
    super();
    this.#signal = signal;
    signal.addEventListener("abort", this.#listener, { once: true });
  }

  /** Unlinks `subscriber`; the last one out takes the listener off the signal. */
  leave(subscriber: Subscriber): void {
    this.remove(subscriber);
    if (this.size === 0 && hubs.get(this.#signal) === this) {
      hubs.delete(this.#signal);
      this.#signal.removeEventListener("abort", this.#listener);
    }
  }

  /**
   * Calls each subscriber once. The head is unlinked before it is called, so a callback may cancel
   * itself or any other subscriber (which then is not called); a callback that throws does not stop
   * the others (its error is reported afterwards, as an event listener's would be).
   */
  #fire(): void {
    hubs.delete(this.#signal);
    const reason: unknown = this.#signal.reason;
    for (let subscriber = this.shift(); subscriber !== undefined; subscriber = this.shift()) {
      try {
        subscriber.callback(reason);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}

/**
 * Calls `callback(signal.reason)` once, when `signal` aborts, through the signal's hub (one
 * listener per signal, whatever the number of subscribers). Cancel the subscription however the
 * wait ends. On a signal that is already aborted, `callback` runs in a microtask unless the
 * subscription is cancelled first (it never runs synchronously inside this call).
 */
export function subscribeAbort(signal: AbortSignal, callback: (reason: unknown) => void): AbortSubscription {
  const subscriber = new Subscriber(callback);
  if (signal.aborted) {
    let cancelled = false;
    queueMicrotask(() => {
      if (!cancelled) callback(signal.reason);
    });
    return {
      cancel: () => {
        cancelled = true;
      },
    };
  }
  let hub = hubs.get(signal);
  if (hub === undefined) {
    hub = new AbortHub(signal);
    hubs.set(signal, hub);
  }
  hub.push(subscriber);
  return subscriber;
}

/**
 * Settles like `promise`, unless one of `signals` aborts first: then rejects with that signal's
 * reason (and `promise` is left to settle on its own; the caller cleans up after it).
 * Subscriptions are cancelled however it ends.
 */
export function abortable<T>(promise: Promise<T>, signals: ReadonlyArray<AbortSignal | undefined>): Promise<T> {
  for (const signal of signals) {
    if (signal?.aborted) return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const unlisten = onAnyAbort(signals, reject);
    promise.then(
      (value) => {
        unlisten();
        resolve(value);
      },
      (error: unknown) => {
        unlisten();
        reject(error);
      },
    );
  });
}

/**
 * Calls `onAbort(reason)` once, when the first of `signals` aborts (see {@link subscribeAbort};
 * no listener per call, one per signal). Returns the function that cancels every subscription it
 * made (call it however the wait ends).
 */
export function onAnyAbort(
  signals: ReadonlyArray<AbortSignal | undefined>,
  onAbort: (reason: unknown) => void,
): () => void {
  const subscriptions: AbortSubscription[] = [];
  const unlisten = (): void => {
    for (const subscription of subscriptions) subscription.cancel();
  };
  for (const signal of signals) {
    if (signal === undefined) continue;
    subscriptions.push(
      subscribeAbort(signal, (reason) => {
        unlisten();
        onAbort(reason);
      }),
    );
  }
  return unlisten;
}

/** Counts operations in flight (see `InFlight`): `begin` when one starts, `end` when it settles. */
export interface OperationCount {
  begin(): void;
  end(): void;
}

/** What {@link CloseGate.race} finds when nothing ends a race before it starts. */
const NOT_EARLY: unique symbol = Symbol("not early");

/** One race of a {@link CloseGate} that has not settled yet. */
class PendingRace implements Linked<PendingRace> {
  prev: PendingRace | undefined;
  next: PendingRace | undefined;
  list: IntrusiveList<PendingRace> | undefined;

  constructor(readonly reject: (reason: unknown) => void) {}
}

/**
 * Lets many short operations be cut short by their owner's `close()` without adding an abort
 * listener to a shared signal for each one (the caller's signal is watched through its hub).
 */
export class CloseGate {
  /** Pending races, linked through themselves: joining and leaving cost no Set entry. */
  readonly #pending = new IntrusiveList<PendingRace>();
  #closed = false;
  #reason: unknown;

  /** Rejects every pending race, and every later one, with `reason`. */
  close(reason: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#reason = reason;
    for (let race = this.#pending.shift(); race !== undefined; race = this.#pending.shift()) race.reject(reason);
  }

  /** Throws what a race would reject with at once: the close reason, or `signal`'s if it aborted. */
  check(signal: AbortSignal | undefined): void {
    if (this.#closed) throw this.#reason;
    if (signal?.aborted) throw signal.reason;
  }

  /**
   * Settles like `promise`, unless `signal` aborts or the gate closes first. With `inFlight`,
   * `promise` is counted there until it settles (however the race ends), through the race's own
   * reaction to it: one reaction for both.
   */
  race<T>(promise: Promise<T>, signal: AbortSignal | undefined, inFlight?: OperationCount): Promise<T> {
    const early = this.#closed ? this.#reason : signal?.aborted ? signal.reason : NOT_EARLY;
    if (early !== NOT_EARLY) {
      if (inFlight !== undefined) {
        inFlight.begin();
        const end = (): void => inFlight.end();
        promise.then(end, end);
      }
      return Promise.reject(early);
    }
    inFlight?.begin();
    return new Promise<T>((resolve, reject) => {
      let subscription: AbortSubscription | undefined;
      const race = new PendingRace(reject);
      const finish = <V>(settle: (value: V) => void, value: V): void => {
        inFlight?.end();
        if (race.list === undefined) return; // lost to an abort or the close; counted only
        this.#pending.remove(race);
        subscription?.cancel();
        settle(value);
      };
      this.#pending.push(race);
      if (signal !== undefined) {
        subscription = subscribeAbort(signal, (reason) => {
          this.#pending.remove(race);
          subscription?.cancel();
          reject(reason);
        });
      }
      promise.then(
        (value) => finish(resolve, value),
        (error: unknown) => finish(reject, error),
      );
    });
  }
}
