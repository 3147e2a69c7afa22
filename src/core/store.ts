import type {
  AdoptRequest,
  AttemptOutcome,
  AttemptRequest,
  Backend,
  ExtendOutcome,
  HandOff,
  InProcess,
  ListedResource,
  LockHandle,
  Registration,
  ReleaseWatcher,
  StoredView,
  Unsupported,
} from "../backend.js";
import { UnsupportedError } from "../errors.js";
import type { KeyStates } from "../internal/waiter.js";
import type { ReleaseOutcome } from "../locker.js";

/** Why a store that says nothing about a capability lacks it. */
const NO_HAND_OFF = "this store cannot hand a lease to another process";
const NO_LISTING = "this store cannot name its keys";
const NO_FENCING = "this store issues none";

/**
 * A {@link Backend} as the core's parts use it: its six members, and each capability asked for by
 * what it does, with the answer of a store that lacks it said once, here (the key is its own name,
 * no queue to leave, a refusal that says why).
 */
export class Store {
  readonly backend: Backend;
  readonly watcher: ReleaseWatcher;
  /** Set when the store lives in this process and answers at once (see {@link InProcess}). */
  readonly inProcess: InProcess | undefined;
  /** It counts permits (semaphores, read-write locks). */
  readonly countsPermits: boolean;
  /** Its locks stay held until released: the core releases a lease it declares lost. */
  readonly heldUntilReleased: boolean;
  readonly #can: Backend["can"];

  readonly #keys: KeyStates;

  /** @param keys the core's key states: a key waited for keeps its store name there. */
  constructor(backend: Backend, keys: KeyStates) {
    this.backend = backend;
    this.#keys = keys;
    this.watcher = backend.watcher;
    const can = backend.can;
    this.#can = can;
    this.inProcess = can.inProcess;
    this.countsPermits = can.permits === true;
    this.heldUntilReleased = can.heldUntilReleased === true;
  }

  acquire(request: AttemptRequest): Promise<AttemptOutcome> {
    return this.backend.acquire(request);
  }

  extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    return this.backend.extend(handles, duration);
  }

  release(handle: LockHandle, cleanUp?: boolean): Promise<ReleaseOutcome> {
    return this.backend.release(handle, cleanUp);
  }

  inspect(resource: string): Promise<StoredView> {
    return this.backend.inspect(resource);
  }

  /**
   * The store's name for `key` (the key itself without `Capabilities.naming`): kept on the key's
   * state while anyone waits for it (a stable string hashes once in every map it meets).
   */
  resourceOf(key: string): string {
    const kept = this.#keys.get(key)?.resource;
    if (kept !== undefined) return kept;
    const naming = this.#can.naming;
    return naming === undefined ? key : naming.resourceOf(key);
  }

  /** Throws an UnsupportedError when `resource` cannot be used for counted locks. */
  checkPermits(resource: string): void {
    this.#can.naming?.checkPermits?.(resource);
  }

  /** True when releases of `resource` grant it to a queued waiter (see `WaitQueue.grants`). */
  grants(resource: string): boolean {
    const queue = this.#can.queue;
    return queue?.grants?.(resource) === true;
  }

  /** The handle of a grant the store reported (see `WaitQueue.grantedHandle`). */
  grantedHandle(resource: string, registration: Registration, grantedServerMs: number): LockHandle {
    const grantedHandle = this.#can.queue?.grantedHandle;
    if (grantedHandle === undefined) throw new Error("This store grants nothing: it reported a grant");
    return grantedHandle.call(this.#can.queue, resource, registration, grantedServerMs);
  }

  /** Leaves the store's queue (see `WaitQueue.leaveQueue`); nothing to leave without one. */
  leaveQueue(resource: string, waiterId: string, grantedToken?: string): Promise<void> {
    const queue = this.#can.queue;
    return queue === undefined ? Promise.resolve() : queue.leaveQueue(resource, waiterId, grantedToken);
  }

  /** Throws an UnsupportedError when `resource` cannot be fenced, before anything is sent. */
  checkFencing(resource: string): void {
    const fencing = this.#can.fencing;
    if (fencing === undefined || "unsupported" in fencing) {
      throw new UnsupportedError(`Fencing tokens: ${refusal(fencing, NO_FENCING)}`);
    }
    fencing.checkFencing?.(resource);
  }

  /** A fencing token for `handle` (call {@link checkFencing} first). */
  issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    const fencing = this.#can.fencing;
    if (fencing === undefined || "unsupported" in fencing) {
      return Promise.reject(new UnsupportedError(`Fencing tokens: ${refusal(fencing, NO_FENCING)}`));
    }
    return fencing.issueFencingToken(handle);
  }

  /** The store's lease transfer, or an UnsupportedError naming `operation` and saying why not. */
  handOff(operation: string): HandOff {
    const handOff = this.#can.handOff;
    if (handOff === undefined || "unsupported" in handOff) {
      throw new UnsupportedError(`${operation}: ${refusal(handOff, NO_HAND_OFF)}`);
    }
    return handOff;
  }

  /** Takes over a handed-off lease (see `HandOff.adopt`). */
  adopt(request: AdoptRequest): Promise<LockHandle | "taken" | "expired"> {
    return this.handOff("Adopting a lease").adopt(request);
  }

  /** Held keys (see `Listing.list`), or a rejection with an UnsupportedError that says why not. */
  list(prefix: string, limit: number): Promise<ListedResource[]> {
    const listing = this.#can.listing;
    if (listing === undefined || "unsupported" in listing) {
      return Promise.reject(new UnsupportedError(`Listing held locks: ${refusal(listing, NO_LISTING)}`));
    }
    return listing.list(prefix, limit);
  }
}

/** What a refusal says: the store's reason, else `otherwise`. */
function refusal(capability: Unsupported | object | undefined, otherwise: string): string {
  return capability !== undefined && "unsupported" in capability ? (capability as Unsupported).unsupported : otherwise;
}
