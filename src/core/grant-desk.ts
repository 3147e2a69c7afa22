import { performance } from "node:perf_hooks";
import { type Grant, LockHandle } from "../backend.js";
import type { KeyState, Waiter } from "../internal/waiter.js";
import type { Acquisition } from "./acquisition.js";
import type { AcquireCall, CoreParts } from "./core-parts.js";
import { type CoreWaiter, CountedWaiter, type QueuePlace } from "./waiters.js";

/**
 * The hand-off side of the core: what happens when a backend with a grant queue reports that a
 * release granted a key (see `BackendEvents.granted`). The grant goes to the waiter it names — the
 * head of the key's queue here (locks: one queue entry per locker), or the counted waiter with
 * that id (semaphores, read-write locks: one entry per waiter) — or, when nobody here takes it any
 * more, straight back to the store, rather than block everyone for the grace. A grant that arrives
 * while the named waiter's attempt is in flight is kept until that attempt has settled.
 */
export class GrantDesk {
  readonly #parts: CoreParts;

  constructor(parts: CoreParts) {
    this.#parts = parts;
  }

  /**
   * A release granted `resource` to the waiter named in "g:<id>:<token>:<server ms>". Another
   * locker's grant means nothing to try yet. Ours goes to the head of the key's queue — when its
   * token is this locker's latest registration and no attempt is in flight (an attempt sent after
   * the registration takes the granted key itself). Nobody here waiting any more, or a token that
   * no waiter here will claim (a registration an attempt cut short made, learnt of too late): the
   * key is released at once instead of blocking everyone for the grace.
   */
  onGrant(key: string, grant: Grant): void {
    const resource = this.#parts.store.resourceOf(key);
    if (this.#parts.counted) {
      this.#onCountedGrant(key, resource, grant);
      return;
    }
    if (grant.waiterId !== this.#parts.waiterId) {
      this.#parts.keys.postponeHead(key);
      return;
    }
    const state = this.#parts.keys.get(key);
    const head = state?.waiters.head;
    if (state === undefined || head === undefined) {
      this.giveBack(grant.token, resource);
      return;
    }
    const registration = state.registration;
    if (state.attempting) {
      // The attempt in flight either registered this token (the message outran its reply) or will
      // take the key itself (it carries the claim token): decide when its reply is in.
      state.earlyGrant = grant;
      return;
    }
    if (registration?.token !== grant.token) {
      this.giveBack(grant.token, resource);
      return;
    }
    // Spent: no later attempt of this locker may take the key as "granted to us" again.
    state.registration = undefined;
    head.grant(this.#parts.store.grantedHandle(resource, registration, grant.serverMs));
  }

  /**
   * A release granted permits to the counted waiter named in "g:<id>:<token>:<server ms>": hand
   * them to that waiter if it is still here and the token is its latest registration; otherwise
   * give them back at once (rather than hold them for the grace).
   */
  #onCountedGrant(key: string, resource: string, grant: Grant): void {
    const { waiterId, token, serverMs } = grant;
    const prefix = `${this.#parts.waiterId}.`;
    if (!waiterId.startsWith(prefix)) return;
    const waiter = countedWaiterOf(this.#parts.keys.get(key), Number(waiterId.slice(prefix.length)));
    if (waiter === undefined) {
      this.giveBack(token, resource);
      return;
    }
    if (waiter.attempting) {
      waiter.earlyGrant = grant;
      return;
    }
    const registration = waiter.registration;
    if (registration?.token !== token) {
      this.giveBack(token, resource);
      return;
    }
    waiter.registration = undefined;
    waiter.grant(this.#parts.store.grantedHandle(resource, registration, serverMs));
  }

  /**
   * Acts on a grant message that arrived while the attempt for `place` was in flight (a lock's
   * head's, or a counted waiter's), now that the attempt has settled (and, if it registered, its
   * registration is known).
   */
  settleEarlyGrant(key: string, place: QueuePlace): void {
    const early = place.earlyGrant;
    place.earlyGrant = undefined;
    if (early !== undefined) this.onGrant(key, early);
  }

  /**
   * Turns a grant handed to `waiter` into the acquisition of `call`: registers it (its first extension, due at
   * once, lengthens the grant's short TTL) and issues a fencing token when asked. Undefined when
   * the grant's validity had already run out (it is released; the caller tries). Answers at once
   * unless a fencing token is asked for (a round trip): a hand-off's waiter resumes without a
   * promise of its own in between.
   */
  takeGrant(call: AcquireCall, waiter: Waiter): Acquisition | undefined | Promise<Acquisition | undefined> {
    const handle = waiter.takeGrant();
    if (handle === undefined) return undefined;
    if (performance.now() >= handle.validUntil) {
      void this.#parts.lifetime.track(this.#parts.store.release(handle, true));
      return undefined;
    }
    // Kept (and extended: the grant's TTL is short) from now on, also while its fencing token is
    // on its way: a round trip later would be too late on a slow link.
    const acquisition = this.#parts.holdings.registerGrant(call, handle);
    return call.request.fencing ? this.#fence(call, acquisition) : acquisition;
  }

  /** Issues the fencing token of a granted `acquisition`; undefined when the key vanished meanwhile. */
  async #fence(call: AcquireCall, acquisition: Acquisition): Promise<Acquisition | undefined> {
    let fencingToken: bigint | undefined;
    try {
      fencingToken = await this.#parts.lifetime.gate.race(
        this.#parts.lifetime.track(this.#parts.store.issueFencingToken(acquisition.handle)),
        call.signal,
      );
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
   * Passes on a grant handed to `waiter` that it left without taking (its caller gave up, or the
   * locker closed, before it waited again): to the next waiter here, which holds the locker's place
   * now (locks); else back to the store at once, leaving the queue in the same step — rather than
   * block everyone for the grace.
   */
  passOn(state: KeyState, waiter: CoreWaiter, handle: LockHandle): void {
    const next = this.#parts.counted ? undefined : state.waiters.head;
    if (next !== undefined) {
      next.grant(handle);
      return;
    }
    const { waiterId } = waiter.joinQueueing(this.#parts);
    void this.#parts.lifetime.track(this.#parts.store.leaveQueue(handle.resource, waiterId, handle.token));
  }

  /** Releases a grant nobody here takes, at once, rather than block others for the grace. */
  giveBack(token: string, resource: string): void {
    if (!this.#parts.lifetime.closing.aborted)
      void this.#parts.lifetime.track(this.#parts.store.release(new LockHandle(token, resource, 0, 0), true));
  }
}

/**
 * The counted waiter with sequence number `seq` among `state`'s waiters, if it still waits: found
 * by walking the key's FIFO from its head, where the store's queue, served in arrival order,
 * grants first. (A map of waiters would take an entry in and out per wait, and a map whose keys
 * keep changing rebuilds its table every few operations.)
 */
function countedWaiterOf(state: KeyState | undefined, seq: number): CountedWaiter | undefined {
  for (let waiter = state?.waiters.head; waiter !== undefined; waiter = waiter.next) {
    if (waiter instanceof CountedWaiter && waiter.seq === seq) return waiter;
  }
  return undefined;
}
