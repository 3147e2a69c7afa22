import type { Grant, LockHandle, Registration } from "../backend.js";
import { onAnyAbort } from "./abortable.js";
import { IntrusiveList, type Linked } from "./intrusive-list.js";

/**
 * How a {@link Waiter.wait} ended when it did not reject: notified (try now), timed out (try as a
 * safety net), postponed (nothing to try yet; wait again with a fresh timeout), or granted (the
 * key was handed over: take the grant with {@link Waiter.takeGrant}).
 */
export type WaitOutcome = "notified" | "timeout" | "postponed" | "granted";

/**
 * One caller waiting for a key. A notification that arrives while the caller is busy (say, in the
 * middle of an attempt) is remembered, so the next `wait` returns at once: no wake-up is lost.
 */
export class Waiter implements Linked<Waiter> {
  #pending = false;
  #grant: LockHandle | undefined;
  prev: Waiter | undefined;
  next: Waiter | undefined;
  list: IntrusiveList<Waiter> | undefined;
  #wake: ((outcome: WaitOutcome) => void) | undefined;

  /** Ends the current wait, or the next one if the caller is not waiting right now. */
  notify(): void {
    this.#pending = true;
    this.#wake?.("notified");
  }

  /** Hands the waiter a grant: ends the current wait, or the next one, with "granted". */
  grant(grant: LockHandle): void {
    this.#grant = grant;
    this.#wake?.("granted");
  }

  /** True while a grant waits to be taken. */
  get granted(): boolean {
    return this.#grant !== undefined;
  }

  /** The grant handed over, once (see {@link grant}). */
  takeGrant(): LockHandle | undefined {
    const grant = this.#grant;
    this.#grant = undefined;
    return grant;
  }

  /** Ends the current wait (if any) so it restarts with a fresh timeout; not remembered. */
  postpone(): void {
    this.#wake?.("postponed");
  }

  /**
   * Waits for a notification, `timeoutMs` (if given), or the abort of any of `signals`, whichever
   * comes first; an abort rejects with that signal's reason. Leaves no timer or listener behind.
   * An abort comes before a grant not taken yet (the caller gave up): whoever ends the wait passes
   * that grant on ({@link takeGrant}), or the key stays blocked for the store's grace.
   */
  wait(timeoutMs: number | undefined, signals: ReadonlyArray<AbortSignal | undefined>): Promise<WaitOutcome> {
    for (const signal of signals) {
      if (signal?.aborted) return Promise.reject(signal.reason);
    }
    if (this.#grant !== undefined) return Promise.resolve("granted");
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve("notified");
    }
    return new Promise<WaitOutcome>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const finish = (): void => {
        this.#wake = undefined;
        if (timer !== undefined) clearTimeout(timer);
        unlisten();
      };
      const unlisten = onAnyAbort(signals, (reason) => {
        finish();
        reject(reason);
      });
      this.#wake = (outcome) => {
        finish();
        if (outcome === "notified") this.#pending = false;
        resolve(outcome);
      };
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          finish();
          resolve("timeout");
        }, timeoutMs);
        timer.unref();
      }
    });
  }
}

/**
 * What one locker knows about one key: how many of its acquisitions hold it, and who waits for it
 * here, first in, first out. Only the head of the queue competes for the key, so waiters in one
 * process are served in arrival order and one release costs one retry, not a thundering herd.
 */
export class KeyState extends IntrusiveList<Waiter> {
  /** Acquisitions of this key that the locker holds (not released, not known lost). */
  held = 0;

  /** Callers waiting for the key here, in arrival order: the state is its own list (one object). */
  get waiters(): IntrusiveList<Waiter> {
    return this;
  }

  /** True while the head's attempt is in flight. */
  attempting = false;
  /** The locker's own bookkeeping of the key's cross-process hand-off (its latest registration). */
  registration: Registration | undefined;
  /** A grant message that arrived while the head's attempt was in flight (it may be for it). */
  earlyGrant: Grant | undefined;
  /** Nothing held or waited for: kept for a later call on the key (see {@link KeyStates}). */
  idle = false;
  /** The key's full store name, built once (a stable string hashes once in every map). */
  resource: string | undefined;
  /** When a waiter here last had to wait for the key (monotonic ms; -Infinity: never). */
  waitedAt = Number.NEGATIVE_INFINITY;
  /**
   * The locker's latest release of the key handed it on to a waiter (counted locks): its next
   * release likely will too (see `LockHandle.contended`). Cleared by a release that hands it to
   * nobody.
   */
  grantedOnward = false;
}

/** Idle key states kept before any purge (see {@link KeyStates}). */
const IDLE_KEPT = 1024;

/**
 * Keys a locker tracks before a lock's state, once its key is taken, goes back to being a count
 * (see {@link KeyStates.settle}): below it, a key locked again and again reuses its state.
 */
const FEW_KEYS = 1024;

/**
 * The {@link KeyState} of every key a locker holds or waits for. Everything about a key lives on
 * its state object, so an uncontended lock and release touch one map entry.
 *
 * A key that is only held here (by one acquisition or more, nobody waiting here, nothing known of
 * its hand-off: a `tryLock`, say) needs no state object: its entry is just the number of its
 * acquisitions held here, until a call opens a state for it (see {@link open}). So 100,000 held
 * locks cost 100,000 map entries and no state objects.
 *
 * A state whose key is no longer held or waited for is not deleted at once: inserting and deleting
 * entries of a large V8 Map (10,000 held locks, say) costs microseconds and old-generation garbage
 * as its table is rebuilt, while a key locked again and again would pay that on every call. Idle
 * entries stay (a state, or the count 0; a later call on the key finds them), and are purged in one
 * pass once there are more than 1,024 of them and they outnumber the busy ones: memory stays
 * bounded by twice the busy keys (or 1,024), and the purge costs O(1) per call amortised.
 */
export class KeyStates {
  /** Per key: its state, or (no state object) how many acquisitions hold it here (0: idle). */
  readonly #states = new Map<string, KeyState | number>();
  #idle = 0;

  /** The state of `key`, if it has one (something is waited for, or was recently). */
  get(key: string): KeyState | undefined {
    const entry = this.#states.get(key);
    return typeof entry === "number" ? undefined : entry;
  }

  /** How many acquisitions of `key` this locker holds (not released, not known lost). */
  heldCount(key: string): number {
    const entry = this.#states.get(key);
    return entry === undefined ? 0 : typeof entry === "number" ? entry : entry.held;
  }

  /** The state of `key`, created if needed; pair with {@link tidy} once done with it. */
  open(key: string): KeyState {
    const entry = this.#states.get(key);
    if (entry === undefined || typeof entry === "number") {
      const state = new KeyState();
      if (entry === 0) this.#idle -= 1;
      else if (entry !== undefined) state.held = entry;
      this.#states.set(key, state);
      return state;
    }
    if (entry.idle) this.#wake(entry);
    return entry;
  }

  /** Counts one more acquisition of `key` held here. */
  hold(key: string): void {
    const entry = this.#states.get(key);
    if (entry === undefined || typeof entry === "number") {
      if (entry === 0) this.#idle -= 1;
      this.#states.set(key, (entry ?? 0) + 1);
      return;
    }
    if (entry.idle) this.#wake(entry);
    entry.held += 1;
  }

  /** Counts one acquisition of `key` fewer held here (released, or found lost). */
  unhold(key: string): void {
    const entry = this.#states.get(key);
    if (entry === undefined || entry === 0) return;
    if (typeof entry !== "number") {
      entry.held -= 1;
      this.tidy(key, entry);
      return;
    }
    this.#states.set(key, entry - 1);
    if (entry === 1) this.#idled();
  }

  /**
   * `state` is no longer needed while `key` is only held here: once the locker has many keys, the
   * entry of a key that a `lock` call just took goes back to being the count of its acquisitions (as
   * a `tryLock`'s is), so that a held lock costs no state object. Kept as it is while anyone waits
   * for the key here, its attempt or grant is pending, or it was waited for (those need the state),
   * and while the locker has few keys (a key locked again and again reuses its state).
   */
  settle(key: string, state: KeyState): void {
    if (
      this.#states.size <= FEW_KEYS ||
      state.waiters.size !== 0 ||
      state.held === 0 ||
      state.attempting ||
      state.registration !== undefined ||
      state.earlyGrant !== undefined ||
      state.grantedOnward ||
      state.waitedAt !== Number.NEGATIVE_INFINITY ||
      this.#states.get(key) !== state
    ) {
      return;
    }
    this.#states.set(key, state.held);
  }

  /** Marks `key`'s state idle when nothing is held or waited for any more. */
  tidy(_key: string, state: KeyState): void {
    if (state.idle || state.held !== 0 || state.waiters.size !== 0) return;
    state.idle = true;
    this.#idled();
  }

  /** An idle state is in use again: what it still knew of the hand-off is spent (its waiters left the queue). */
  #wake(state: KeyState): void {
    state.idle = false;
    state.registration = undefined;
    state.earlyGrant = undefined;
    this.#idle -= 1;
  }

  /** One more idle entry; purges them when they are many. */
  #idled(): void {
    this.#idle += 1;
    if (this.#idle > IDLE_KEPT && this.#idle * 2 > this.#states.size) this.#purge();
  }

  #purge(): void {
    for (const [key, entry] of this.#states) {
      if (entry === 0 || (typeof entry !== "number" && entry.idle)) this.#states.delete(key);
    }
    this.#idle = 0;
  }

  /**
   * Takes `waiter` out of `key`'s queue. When it was the head and `passOn` is set (it leaves
   * without having used its turn: aborted, closed, or it took the key while others queued behind
   * it), the new head is notified so that no wake-up is lost.
   */
  leave(key: string, state: KeyState, waiter: Waiter, passOn: boolean): void {
    const wasHead = state.waiters.head === waiter;
    if (!state.waiters.remove(waiter)) return;
    if (wasHead && passOn) state.waiters.head?.notify();
    this.tidy(key, state);
  }

  /** Wakes the head of `key`'s queue, if any. */
  notifyHead(key: string): void {
    this.get(key)?.waiters.head?.notify();
  }

  /** Restarts the wait of the head of `key`'s queue with a fresh timeout, if it is waiting. */
  postponeHead(key: string): void {
    this.get(key)?.waiters.head?.postpone();
  }

  /** Wakes every waiter of `key` (a counted lock's waiters each compete on their own). */
  notifyAll(key: string): void {
    for (let waiter = this.get(key)?.waiters.head; waiter !== undefined; waiter = waiter.next) waiter.notify();
  }

  /** Every waiter of every key (a snapshot: they may leave while the caller goes through it). */
  waiters(): Waiter[] {
    const all: Waiter[] = [];
    for (const entry of this.#states.values()) {
      if (typeof entry === "number") continue;
      for (let waiter = entry.waiters.head; waiter !== undefined; waiter = waiter.next) all.push(waiter);
    }
    return all;
  }

  /** Wakes the head of every queue (after notifications may have been lost). */
  notifyAllHeads(): void {
    for (const entry of this.#states.values()) {
      if (typeof entry !== "number") entry.waiters.head?.notify();
    }
  }
}
