import type { AttemptOutcome, BackendEvents } from "../backend.js";
import { getOrInsert } from "../internal/get-or-insert.js";

/**
 * How an attempt treats its key's gate (a parameter of the semaphores' take statements): its
 * waiter holds the gate already, takes it (a waiter that queues), or only checks that it is open
 * (a caller that does not queue).
 */
export const GATE = { held: 0, take: 1, check: 2 } as const;

/** One of {@link GATE}'s modes. */
export type GateMode = (typeof GATE)[keyof typeof GATE];

/** What a semaphore backend keeps of a key, beyond the store's names of it (see {@link SlotBooks}). */
export interface SlotKey {
  readonly resource: string;
  /** Waiters of this locker queued for the key (by their id in the core), first in line first. */
  readonly waiters: Set<string>;
  /** The waiter here that holds the key's gate on the current session, if any. */
  gateHolder: string | undefined;
  /** The latest step on the key here (this locker's attempts on a key run one after another). */
  turn: Promise<unknown> | undefined;
}

/** Permits held here: the session's slots of a key. */
export interface HeldSlots<S> {
  readonly session: S;
  readonly resource: string;
  readonly slots: readonly number[];
}

/** What {@link SlotBooks} needs of its backend. */
export interface SlotBooksSettings<K extends SlotKey> {
  /** The state of a key seen for the first time: the store's names of it, and no waiter, gate or turn. */
  makeKey(resource: string): K;
  /** Where the next waiter here is woken (`released` of the caller's key). */
  readonly events: BackendEvents;
  /** Length of the locker's key prefix (the caller's key is the resource without it). */
  readonly prefixLength: number;
  /** Someone here took the key's gate, or nobody here holds it any more. */
  gateMoved?(key: K): void;
}

/**
 * The books of a slot semaphore on a session-lock store (PostgreSQL's and MySQL's semaphores,
 * where a key of limit N is N slot locks and a gate): the permits held here and the slots they
 * hold, and per key this locker's waiters in arrival order, which of them holds the gate, and the
 * turn its steps take (one after another, so that the slots one attempt takes are known, and
 * skipped, by the next). A key's state is made on first use and dropped once idle.
 */
export class SlotBooks<S, K extends SlotKey> {
  readonly #settings: SlotBooksSettings<K>;
  /** Permits held here, by token. */
  readonly #held = new Map<string, HeldSlots<S>>();
  /** Per resource, the slots the current session holds (skipped by its attempts). */
  readonly #slots = new Map<string, Set<number>>();
  readonly #keys = new Map<string, K>();

  constructor(settings: SlotBooksSettings<K>) {
    this.#settings = settings;
  }

  /** What this locker keeps of `resource` (made on first use; forgotten once idle). */
  key(resource: string): K {
    let key = this.#keys.get(resource);
    if (key === undefined) {
      key = this.#settings.makeKey(resource);
      this.#keys.set(resource, key);
    }
    return key;
  }

  /**
   * Runs `step` once the previous step on the key here settled; the key's state is dropped once
   * nothing runs, waits or holds the gate for it.
   */
  inTurn<T>(key: K, step: () => Promise<T>): Promise<T> {
    const previous = key.turn;
    const run = previous === undefined ? step() : previous.then(step);
    const settled = run.catch(() => undefined);
    key.turn = settled;
    void settled.then(() => {
      if (key.turn !== settled) return;
      key.turn = undefined;
      if (key.waiters.size === 0 && key.gateHolder === undefined) this.#keys.delete(key.resource);
    });
    return run;
  }

  /**
   * How `waiterId`'s attempt treats the gate, or `undefined` when it may not try: in arrival order
   * here, only the first waiter tries, and a caller that does not queue (`join` false) only while
   * none does; and not while another waiter here holds the gate.
   */
  gateMode(key: K, waiterId: string, join: boolean): GateMode | undefined {
    const [first] = key.waiters;
    if (first !== undefined && !(join && first === waiterId)) return undefined;
    if (key.gateHolder === waiterId) return GATE.held;
    if (key.gateHolder !== undefined) return undefined;
    return join ? GATE.take : GATE.check;
  }

  /** A miss; a waiter joins this locker's queue of the key, and is told it queued. */
  missed(key: K, join: boolean, waiterId: string, weight: number, sentAt: number): AttemptOutcome {
    if (!join) return { kind: "held" };
    key.waiters.add(waiterId);
    return { kind: "held", registration: { token: "", weight, sentAt, serverMs: 0 } };
  }

  /** Records who holds `key`'s gate here. */
  setGate(key: K, holder: string | undefined): void {
    if (key.gateHolder === holder) return;
    const moved = (key.gateHolder === undefined) !== (holder === undefined);
    key.gateHolder = holder;
    if (moved) this.#settings.gateMoved?.(key);
  }

  /** `waiterId` took permits of `key`: it leaves the queue here, and the next waiter tries. */
  admitted(key: K, waiterId: string): void {
    if (key.waiters.delete(waiterId) && key.waiters.size > 0) this.#wakeHere(key.resource);
  }

  /**
   * `waiterId` gave up: it leaves the queue here (the next waiter tries if it was first). True when
   * it held the gate, which nobody here holds any more: the backend opens it in the store.
   */
  left(key: K, waiterId: string): boolean {
    const wasFirst = key.waiters.values().next().value === waiterId;
    if (!key.waiters.delete(waiterId)) return false;
    if (wasFirst && key.waiters.size > 0) this.#wakeHere(key.resource);
    if (key.gateHolder !== waiterId) return false;
    this.setGate(key, undefined);
    return true;
  }

  /** The next waiter here tries (once the attempt that let it go has answered). */
  #wakeHere(resource: string): void {
    const { events, prefixLength } = this.#settings;
    queueMicrotask(() => events.released(resource.slice(prefixLength)));
  }

  /** The slots of `resource` the current session holds (none: an empty set, not to be changed). */
  slotsHere(resource: string): ReadonlySet<number> {
    return this.#slots.get(resource) ?? NO_SLOTS;
  }

  /** True while the current session holds a slot of `resource`, or a waiter here holds its gate. */
  busy(resource: string): boolean {
    return (this.#slots.get(resource)?.size ?? 0) > 0 || this.#keys.get(resource)?.gateHolder !== undefined;
  }

  /** Records the permits `held` took, with `token`. */
  hold(token: string, held: HeldSlots<S>): void {
    const slots = getOrInsert(this.#slots, held.resource, () => new Set());
    for (const slot of held.slots) slots.add(slot);
    this.#held.set(token, held);
  }

  /** The permits `token` holds on `session`, taken off the books (`undefined` when it holds none there). */
  release(token: string, session: S | undefined): HeldSlots<S> | undefined {
    const held = this.#held.get(token);
    if (held === undefined || session === undefined || held.session !== session) return undefined;
    this.#held.delete(token);
    const slots = this.#slots.get(held.resource);
    for (const slot of held.slots) slots?.delete(slot);
    if (slots?.size === 0) this.#slots.delete(held.resource);
    return held;
  }

  /**
   * `session` ended: its permits, slots and gates died with it (`current`: it was the current one);
   * the waiters here try again on the next session.
   */
  forget(session: S, current: boolean): void {
    for (const [token, held] of this.#held) if (held.session === session) this.#held.delete(token);
    if (!current) return;
    this.#slots.clear();
    for (const key of this.#keys.values()) this.setGate(key, undefined);
  }
}

const NO_SLOTS: ReadonlySet<number> = new Set();
