import type { Grant, Queueing, Registration } from "../backend.js";
import type { KeyState } from "../internal/waiter.js";
import { Waiter } from "../internal/waiter.js";
import type { CoreParts } from "./core-parts.js";
import type { Store } from "./store.js";

/**
 * What the core knows of one place in a store's grant queue: its latest registration not yet
 * seen granted, whether an attempt for it is in flight, and a grant message that arrived meanwhile
 * (it may be for that attempt's registration: decided once the attempt has settled).
 */
export interface QueuePlace {
  attempting: boolean;
  registration: Registration | undefined;
  earlyGrant: Grant | undefined;
}

/**
 * A caller in the wait loop (see `WaitLoop`): it waits in its key's local FIFO, and this is how it
 * holds its place in the store's grant queue — the one thing in which a lock's waiters and a
 * counted lock's waiters differ. A lock's locker keeps one place per key, for the head of its
 * local FIFO ({@link LockWaiter}); a counted lock's waiter has its own ({@link CountedWaiter}).
 */
export abstract class CoreWaiter extends Waiter {
  /** Whether its first try is the lean one (not in the store's queue; see `WaitLoop`): not by default. */
  get leanFirstTry(): boolean {
    return false;
  }

  /** The place in the store's queue this waiter's attempts use. */
  abstract placeIn(state: KeyState): QueuePlace;
  /** Whether its place is in a queue to keep alive (polled within `backoffMax` of its last try). */
  abstract queued(store: Store, resource: string): boolean;
  /** Whether it is first in line for its place (it may try now, as far as this locker goes). */
  abstract isFirst(state: KeyState): boolean;
  /** The queueing of its attempts that join the store's queue (and leave it on success). */
  abstract joinQueueing(parts: CoreParts): Queueing;
  /** Leaves the key's local FIFO (and this core's books), `acquired` or not. */
  abstract leave(parts: CoreParts, key: string, state: KeyState, acquired: boolean, queued: boolean): void;
  /**
   * Whether it leaves its place in the store's queue when it leaves without the key; `failed`: its
   * last attempt failed in flight, so it may have joined the queue unbeknown to this locker.
   */
  abstract leavesPlace(state: KeyState, queued: boolean, failed: boolean): boolean;
}

/**
 * A waiter of a lock. Its locker keeps one place in the store's queue for the key (its
 * {@link KeyState}: one queue entry per locker), used by the head of the key's local FIFO: only the
 * head competes, and its first try is the lean one.
 */
export class LockWaiter extends CoreWaiter {
  /** A lock's head tries lean first. */
  override get leanFirstTry(): boolean {
    return true;
  }

  /** The key's place, shared by its waiters here. */
  placeIn(state: KeyState): QueuePlace {
    return state;
  }

  /** Whether the store keeps a grant queue for the key. */
  queued(store: Store, resource: string): boolean {
    return store.grants(resource);
  }

  /** Only the head of the local FIFO competes. */
  isFirst(state: KeyState): boolean {
    return state.waiters.head === this;
  }

  /** The locker's own id, shared by its attempts. */
  joinQueueing(parts: CoreParts): Queueing {
    return parts.attempts.join;
  }

  /**
   * The next waiter here is not in the cross-process queue (a holder's locker leaves it): whoever
   * leaves the head, having taken the key or not, wakes it so that it joins.
   */
  leave(parts: CoreParts, key: string, state: KeyState, acquired: boolean, queued: boolean): void {
    parts.keys.leave(key, state, this, !acquired || queued);
  }

  /**
   * The locker's place is left once nobody here waits for the key: its place in a grant queue,
   * or a registration a store without one keeps (an entry in its queue: etcd, lock files), which
   * would otherwise stand ahead of other lockers' waiters until it expired. (Whatever a failed
   * attempt did: while others wait here, the place is theirs, and the next one's try renews it.)
   */
  leavesPlace(state: KeyState, queued: boolean): boolean {
    return (queued || state.registration !== undefined) && state.waiters.size === 0;
  }
}

/**
 * A waiter of a counted lock (semaphores, read-write locks): it has its own place in the store's
 * queue, under its own id, so waiters are served in arrival order across processes. Every waiter
 * competes (permits held here may leave room), never lean: its first failed attempt queues it.
 */
export class CountedWaiter extends CoreWaiter implements QueuePlace {
  /** True while its attempt is in flight. */
  attempting = false;
  /** Its latest registration in the store's queue, not yet seen granted. */
  registration: Registration | undefined;
  /** A grant message that arrived while its attempt was in flight. */
  earlyGrant: Grant | undefined;
  readonly #queueing: Queueing;

  constructor(
    /** Its id in the store's queue: the locker's id, a dot, and {@link seq}. */
    readonly id: string,
    /** Its sequence number in its locker (how the grant desk finds it in its key's FIFO). */
    readonly seq: number,
  ) {
    super();
    this.#queueing = { waiterId: id, joinOnMiss: true, leaveOnSuccess: true };
  }

  /** Its own place. */
  placeIn(): QueuePlace {
    return this;
  }

  /** Those behind it compete on their own: nobody to wake. */
  leave(parts: CoreParts, key: string, state: KeyState): void {
    parts.keys.leave(key, state, this, false);
  }

  /** Always: its place is kept alive by its tries, whatever the store. */
  queued(): boolean {
    return true;
  }

  /**
   * Leaves its place if it has one, or may have one: an attempt that failed in flight may have
   * joined the queue (a timeout here, after it ran in the store), and would stand ahead of later
   * waiters until its liveness ran out. Permits granted to it meanwhile go back (and on to those
   * behind it).
   */
  leavesPlace(_state: KeyState, _queued: boolean, failed: boolean): boolean {
    return failed || this.registration !== undefined;
  }

  /** Every waiter competes on its own. */
  isFirst(): boolean {
    return true;
  }

  /** Its own id. */
  joinQueueing(): Queueing {
    return this.#queueing;
  }
}
