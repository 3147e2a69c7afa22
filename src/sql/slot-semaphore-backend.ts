import { performance } from "node:perf_hooks";
import type * as contract from "../backend.js";
import type { ReleaseOutcome } from "../locker.js";
import { SessionBackend } from "./session-backend.js";
import { type SessionLockLimits, sessionLockCapabilities } from "./session-capabilities.js";
import type { SessionSlotOptions, SlotSession } from "./session-slot.js";
import { type GateMode, type HeldSlots, SlotBooks, type SlotKey } from "./slot-books.js";

/** A session of a slot semaphore: its leases, by token, are dropped as they are released. */
export interface SemaphoreSession extends SlotSession {
  readonly holds: Map<string, unknown>;
}

/**
 * What the slot semaphores of the session-lock stores (PostgreSQL's and MySQL's) share, where a
 * key of limit N is N slot locks and a gate on the locker's one session (see {@link SlotBooks}):
 * this locker's attempts on a key run one after another, in arrival order (only the first waiter
 * here tries, and a caller that does not queue only while none does); a release frees the slots
 * its lease took; a waiter that gives up opens the gate if it held it. The store says how a key
 * is named, how slots are taken and freed, and how the gate is opened.
 */
export abstract class SlotSemaphoreBackend<S extends SemaphoreSession, K extends SlotKey, O extends SessionSlotOptions>
  extends SessionBackend<S, O>
  implements contract.Backend, contract.WaitQueue, contract.Fencing
{
  readonly can: contract.Capabilities;
  abstract readonly watcher: contract.ReleaseWatcher;
  /** Permits of each key. */
  protected readonly limit: number;
  /** Permits held here, their slots, and this locker's waiters and gates per key. */
  protected readonly books: SlotBooks<S, K>;

  /**
   * @param options the locker's options.
   * @param limit permits of each key.
   * @param events where this locker's waiters are woken.
   * @param limits why the store's locks cannot be handed off or listed (see `sessionLockCapabilities`).
   */
  protected constructor(options: O, limit: number, events: contract.BackendEvents, limits: SessionLockLimits) {
    super(options);
    this.can = sessionLockCapabilities(this, limits, { permits: true, queue: this });
    this.limit = limit;
    this.books = new SlotBooks<S, K>({
      makeKey: (resource) => this.keyOf(resource),
      events,
      prefixLength: options.prefix.length,
      gateMoved: (key) => this.gateMoved(key),
    });
  }

  /** The state of a key seen for the first time: the store's names of it (see `SlotBooksSettings.makeKey`). */
  protected abstract keyOf(resource: string): K;

  /** Someone here took the key's gate, or nobody here holds it any more (see `SlotBooksSettings.gateMoved`). */
  protected gateMoved(_key: K): void {}

  acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const key = this.books.key(request.resource);
    return this.books.inTurn(key, () => this.#inTurn(key, request));
  }

  /**
   * An attempt in its key's turn: it refuses once the session was found shared, misses without
   * asking while it may not try (see `SlotBooks.gateMode`), and otherwise the store tries.
   */
  #inTurn(key: K, request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const refusal = this.slot.refusal;
    if (refusal !== undefined) return Promise.reject(refusal);
    const { waiterId, joinOnMiss } = request.queueing;
    const gate = this.books.gateMode(key, waiterId, joinOnMiss);
    if (gate === undefined) {
      return Promise.resolve(this.books.missed(key, joinOnMiss, waiterId, request.weight, performance.now()));
    }
    return this.take(key, request, gate);
  }

  /** One try of `request` on the store, treating the key's gate as `gate` says (see `GATE`). */
  protected abstract take(key: K, request: contract.AttemptRequest, gate: GateMode): Promise<contract.AttemptOutcome>;

  release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    const session = this.slot.current;
    const held = this.books.release(handle.token, session);
    if (held === undefined || session === undefined) return Promise.resolve("expired");
    session.holds.delete(handle.token);
    if (this.slot.endIfLastExpired(session, handle.validUntil)) return Promise.resolve("expired");
    return this.slot.released(session, this.freeSlots(session, held));
  }

  /** Sends the statement that frees `held`'s slots on `session`: true when it freed them all. */
  protected abstract freeSlots(session: S, held: HeldSlots<S>): Promise<boolean>;

  /**
   * A waiter gave up: it leaves this locker's queue of the key, and gives the gate up if it held
   * it; the next waiter here tries.
   */
  leaveQueue(resource: string, waiterId: string): Promise<void> {
    const key = this.books.key(resource);
    return this.books.inTurn(key, async () => {
      if (!this.books.left(key, waiterId)) return;
      const session = this.slot.current;
      if (session !== undefined) await this.openGateOn(session, key);
    });
  }

  /** Opens `key`'s gate on `session` (its waiter here gave up); never rejects. */
  protected abstract openGateOn(session: S, key: K): Promise<void>;

  abstract inspect(resource: string): Promise<contract.StoredView>;

  abstract issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined>;
}
