import { performance } from "node:perf_hooks";
import * as contract from "../backend.js";
import type { CoreSettings } from "../core/lock-core.js";
import { InvalidArgumentError } from "../errors.js";
import { IntrusiveList, type Linked } from "../internal/intrusive-list.js";
import { type ResolvedAcquireOptions, validateTimerDelay } from "../internal/validate.js";
import type { ReleaseOutcome } from "../locker.js";
import { resolveOwner } from "../locker-options.js";
import { type Holder, Holders } from "./holders.js";

/**
 * The core's settings for every in-memory locker (they have no options). A lease is held until
 * released (`expiry: Infinity`: its handle is valid until `Infinity`, so the lease keeper neither
 * extends nor watches it) unless acquired with `{ autoExtend: false, expiry }`, which may be as
 * short as 1 ms: nothing is sent over a network. Waiters are handed the key by releases; the
 * safety net (a poll every 10 s) only guards against a bug losing a wake-up.
 */
export const MEMORY_SETTINGS: CoreSettings = Object.freeze({
  expiry: Number.POSITIVE_INFINITY,
  minExpiry: 1,
  operationTimeout: 1,
  backoffMin: 10_000,
  backoffMax: 10_000,
  sweepConcurrency: 1,
  onLockLost: undefined,
});

/** Options every in-memory locker takes. */
export interface MemoryOptions {
  /**
   * Who this locker's holders are, as `inspect` shows them (default
   * `${os.hostname()}:${process.pid}`; a non-empty string of at most 256 bytes).
   */
  owner?: string | undefined;
}

/** The core's settings of an in-memory locker: {@link MEMORY_SETTINGS} with its `owner`. */
export function memorySettings(owner: unknown): CoreSettings {
  return { ...MEMORY_SETTINGS, owner: resolveOwner(owner) };
}

/** A memory lease that is never extended needs a length: there is no locker-wide expiry. */
const NO_DEFAULT_EXPIRY =
  "a lease length in ms with autoExtend: false (a memory lock is held by its process and has no default expiry)";

/**
 * The request an in-memory locker sends to its core: a lease kept alive is held until released,
 * whatever its `expiry` (ignored; the lease's length is `Infinity`); `autoExtend: false` needs an
 * `expiry` that a Node.js timer honours (the lease keeper's timer frees it then).
 */
export function memoryRequest(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
  const { autoExtend, expiry } = options;
  if (autoExtend) return expiry === undefined ? options : { ...options, expiry: undefined };
  if (expiry === undefined) throw new InvalidArgumentError("options.expiry", NO_DEFAULT_EXPIRY, expiry);
  validateTimerDelay("options.expiry", expiry);
  return options;
}

const INFINITY = Number.POSITIVE_INFINITY;

/** Idle slots (nothing held or queued) kept for reuse: a key locked again costs no allocation. */
const IDLE_KEPT = 1024;

/** The holder of one permit until released (most holders): shared, as holders never change. */
const ONE_UNTIL_RELEASED: Holder = Object.freeze({ weight: 1, deadline: INFINITY });

/** A queued waiter's place (one per waiter id): its latest registration. */
class Place implements Linked<Place> {
  prev: Place | undefined;
  next: Place | undefined;
  list: IntrusiveList<Place> | undefined;
  token = "";
  weight = 1;
  duration = 0;

  constructor(readonly waiterId: string) {}
}

/** A key in use: its holders, the permits they take, and its queue (the slot is its own list). */
class Slot extends IntrusiveList<Place> {
  used = 0;
  readonly holders = new Holders();
  /**
   * Places by waiter id; made when someone first queues. A place leaving the queue stays while it
   * is the only one (a lock's: its locker's, queued and granted again and again), for reuse.
   */
  places: Map<string, Place> | undefined;
  /** The earliest finite deadline of a holder (`Infinity`: none expires). */
  nextDeadline = Number.POSITIVE_INFINITY;

  constructor(readonly key: string) {
    super();
  }
}

/** Memory needs no subscription: the backend reports releases itself, synchronously. */
const WATCHER: contract.ReleaseWatcher = {
  watch: () => Promise.resolve(),
  unwatch: () => undefined,
  isWatching: () => true,
  close: () => Promise.resolve(),
};

/**
 * The backend of the in-memory lockers: keys of one locker, in its process. A key has `limit`
 * permits (1 for a lock); a holder takes `weight` of them. Waiters queue per key in arrival
 * order, and a release (or an expiry, or a waiter that leaves) grants the permits it frees to
 * queued waiters from the head for as long as they fit, reporting each grant synchronously, so a
 * hand-off costs no timer and no poll. An attempt takes permits only when no other waiter is
 * queued ahead of it: a heavy waiter is never overtaken by lighter ones behind it.
 *
 * A holder with a finite deadline (`autoExtend: false`) is dropped once it has passed, when the
 * key is next touched; the lease keeper watches that deadline and wakes the next waiter, which
 * touches it. Tokens are a counter: nothing leaves the process. Fencing tokens rise with every
 * fenced grant of the locker, so they rise per key.
 */
class MemoryBackend
  implements contract.Backend, contract.WaitQueue, contract.Fencing, contract.InProcess, contract.Listing
{
  readonly watcher = WATCHER;
  readonly can: contract.Capabilities = {
    permits: true,
    queue: this,
    fencing: this,
    inProcess: this,
    listing: this,
    handOff: { unsupported: "an in-memory lock belongs to the process that holds it" },
  };
  readonly #slots = new Map<string, Slot>();
  readonly #limit: number;
  readonly #events: contract.BackendEvents;
  #tokens = 0;
  #fence = 0n;

  readonly #owner: string;

  constructor(limit: number, events: contract.BackendEvents, owner: string) {
    this.#limit = limit;
    this.#events = events;
    this.#owner = owner;
  }

  /** This locker's holders of `resource` (unexpired) and its queued waiters. */
  async inspect(resource: string): Promise<contract.StoredView> {
    const slot = this.#slots.get(resource);
    if (slot === undefined) return { holders: [], waiting: 0 };
    const now = performance.now();
    const holders: contract.StoredHolder[] = [];
    for (const [, { weight, deadline, fencingToken }] of slot.holders.entries()) {
      if (deadline <= now) continue;
      const expiresInMs = Math.max(0, deadline - now);
      holders.push(
        fencingToken === undefined
          ? { owner: this.#owner, weight, expiresInMs }
          : { owner: this.#owner, weight, expiresInMs, fencingToken },
      );
    }
    return { holders, waiting: slot.size };
  }

  /** This locker's held keys (from the map of its keys), the first `limit` by key. */
  async list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    const listed: contract.ListedResource[] = [];
    const resources = [...this.#slots.keys()].filter((resource) => resource.startsWith(prefix)).sort();
    for (const resource of resources) {
      if (listed.length >= limit) break;
      const view = await this.inspect(resource);
      if (view.holders.length > 0) listed.push({ key: resource, view });
    }
    return listed;
  }

  grants(): boolean {
    return true;
  }

  acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    return Promise.resolve(this.acquireNow(request));
  }

  /** {@inheritDoc InProcess.acquireNow} */
  acquireNow({ resource, duration, queueing, fencing, weight }: contract.AttemptRequest): contract.AttemptOutcome {
    let slot = this.#slots.get(resource);
    if (slot === undefined) {
      slot = new Slot(resource);
      this.#slots.set(resource, slot);
    }
    // The clock is read only where a deadline is involved (most locks have none).
    const now = duration === INFINITY && slot.nextDeadline === INFINITY ? 0 : performance.now();
    if (slot.nextDeadline <= now) this.#expire(slot, now);
    // Granted to this caller's registration already (not seen yet): its turn has come.
    const claim = queueing.grantedToken;
    const claimed = claim !== undefined && this.#drop(slot, claim);
    const ahead = !claimed && slot.head !== undefined && slot.head.waiterId !== queueing.waiterId;
    if (!ahead && slot.used + weight <= this.#limit) {
      const token = this.#hold(slot, weight, duration, now);
      if (queueing.leaveOnSuccess) this.#unqueue(slot, queueing.waiterId);
      if (claimed) this.#admit(slot, now);
      const handle = new contract.LockHandle(token, resource, now, (slot.holders.get(token) as Holder).deadline);
      return fencing
        ? { kind: "acquired", handle, fencingToken: this.#fenceHolder(slot, token) }
        : { kind: "acquired", handle };
    }
    if (claimed) this.#admit(slot, now);
    if (!queueing.joinOnMiss) return { kind: "held" };
    slot.places ??= new Map();
    let place = slot.places.get(queueing.waiterId);
    if (place === undefined) {
      place = new Place(queueing.waiterId);
      slot.places.set(queueing.waiterId, place);
    }
    if (place.list === undefined) slot.push(place);
    place.token = this.#newToken();
    place.weight = weight;
    place.duration = duration;
    const registration: contract.Registration = { token: place.token, weight, sentAt: now, serverMs: now };
    return { kind: "held", registration };
  }

  async extend(handles: readonly contract.LockHandle[]): Promise<contract.ExtendOutcome[]> {
    // Only a hand-off grant with `autoExtend: false` is ever extended (once): its deadline was set
    // from the grant and stays; the extension just confirms it is still held.
    const now = performance.now();
    return handles.map((handle) => {
      const holder = this.#slots.get(handle.resource)?.holders.get(handle.token);
      if (holder === undefined || holder.deadline <= now) return "expired";
      handle.renew(handle.validFrom, holder.deadline);
      return "extended";
    });
  }

  release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    return Promise.resolve(this.releaseNow(handle));
  }

  /** {@inheritDoc InProcess.releaseNow} */
  releaseNow(handle: contract.LockHandle): ReleaseOutcome {
    const slot = this.#slots.get(handle.resource);
    const holder = slot?.holders.get(handle.token);
    handle.grantedTo = "";
    if (slot === undefined || holder === undefined) return "expired";
    const now = holder.deadline === INFINITY && slot.size === 0 ? 0 : performance.now();
    this.#drop(slot, handle.token);
    const first = this.#admit(slot, now);
    if (first !== undefined) handle.grantedTo = first;
    return holder.deadline <= now ? "expired" : "released";
  }

  grantedHandle(resource: string, registration: contract.Registration, grantedServerMs: number): contract.LockHandle {
    // A holder no longer there (released, expired) makes a handle already past its validity.
    const deadline = this.#slots.get(resource)?.holders.get(registration.token)?.deadline ?? 0;
    return new contract.LockHandle(registration.token, resource, grantedServerMs, deadline);
  }

  async leaveQueue(resource: string, waiterId: string, grantedToken?: string): Promise<void> {
    const slot = this.#slots.get(resource);
    if (slot === undefined) return;
    this.#unqueue(slot, waiterId);
    if (grantedToken !== undefined) this.#drop(slot, grantedToken);
    // The leaver may have been what blocked those behind it.
    this.#admit(slot, performance.now());
  }

  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    return this.issueFencingTokenNow(handle);
  }

  /** {@inheritDoc InProcess.issueFencingTokenNow} */
  issueFencingTokenNow(handle: contract.LockHandle): bigint | undefined {
    const slot = this.#slots.get(handle.resource);
    const holder = slot?.holders.get(handle.token);
    return slot !== undefined && holder !== undefined && holder.deadline > performance.now()
      ? this.#fenceHolder(slot, handle.token)
      : undefined;
  }

  /** Issues the next fencing token to holder `token` of `slot`, and records it for `inspect`. */
  #fenceHolder(slot: Slot, token: string): bigint {
    const fencingToken = ++this.#fence;
    const { weight, deadline } = slot.holders.get(token) as Holder;
    slot.holders.replace(token, { weight, deadline, fencingToken });
    return fencingToken;
  }

  #newToken(): string {
    this.#tokens += 1;
    return this.#tokens.toString(36);
  }

  /** Adds a holder of `weight` permits for `duration` ms from `now`; returns its token. */
  #hold(slot: Slot, weight: number, duration: number, now: number, token = this.#newToken()): string {
    // `now` is 0 where the caller did not read the clock (no deadline was involved then). Whole
    // ms, rounded down, as the lease records it: the keeper and the store expire it together.
    const deadline = duration === INFINITY ? INFINITY : Math.floor((now === 0 ? performance.now() : now) + duration);
    slot.holders.add(token, weight === 1 && deadline === INFINITY ? ONE_UNTIL_RELEASED : { weight, deadline });
    slot.used += weight;
    if (deadline < slot.nextDeadline) slot.nextDeadline = deadline;
    return token;
  }

  /** Removes holder `token` if there is one; returns whether there was. */
  #drop(slot: Slot, token: string): boolean {
    const holder = slot.holders.delete(token);
    if (holder === undefined) return false;
    slot.used -= holder.weight;
    return true;
  }

  /** Drops the holders whose deadline passed and lets queued waiters into what they held. */
  #expire(slot: Slot, now: number): void {
    let next = Number.POSITIVE_INFINITY;
    for (const [token, { deadline }] of slot.holders.entries()) {
      if (deadline <= now) this.#drop(slot, token);
      else if (deadline < next) next = deadline;
    }
    slot.nextDeadline = next;
    this.#admit(slot, now);
  }

  #unqueue(slot: Slot, waiterId: string): void {
    const places = slot.places;
    const place = places?.get(waiterId);
    if (places === undefined || place === undefined) return;
    slot.remove(place);
    if (places.size > 1) places.delete(waiterId);
  }

  /**
   * Grants permits to queued waiters from the head while they fit, then reports the grants (after
   * the slot is consistent: a grant nobody takes is released at once, re-entering this backend).
   * Drops the slot once nothing is held or queued. Returns the first waiter granted, if any.
   */
  #admit(slot: Slot, now: number): string | undefined {
    // The first grant apart: a lock's release grants one (no array to make).
    let first: contract.Grant | undefined;
    let more: contract.Grant[] | undefined;
    for (let head = slot.head; head !== undefined; head = slot.head) {
      if (slot.used + head.weight > this.#limit) break;
      this.#unqueue(slot, head.waiterId);
      this.#hold(slot, head.weight, head.duration, now, head.token);
      const grant = { waiterId: head.waiterId, token: head.token, serverMs: now };
      if (first === undefined) first = grant;
      else if (more === undefined) more = [grant];
      else more.push(grant);
    }
    this.#tidy(slot);
    if (first === undefined) return undefined;
    this.#events.granted(slot.key, first);
    if (more !== undefined) for (const grant of more) this.#events.granted(slot.key, grant);
    return first.waiterId;
  }

  /** Drops `slot` when nothing is held or queued, unless few slots are kept (then it stays, idle). */
  #tidy(slot: Slot): void {
    if (slot.holders.size === 0 && slot.size === 0 && this.#slots.size > IDLE_KEPT) this.#slots.delete(slot.key);
  }
}

/** Makes the backend of an in-memory locker whose keys have `limit` permits (1 for a lock). */
export function memoryBackend(limit: number): contract.BackendFactory {
  return ({ events, owner }) => new MemoryBackend(limit, events, owner);
}
