import type { ReleaseOutcome } from "./locker.js";

/** A lock held in a store: its token, resource, and local validity window (monotonic ms). */
export class LockHandle {
  /** Its ownership token (random, or the store's own: a counter, a token with a weight). */
  readonly token: string;
  /** The store's name for the key (see {@link Naming.resourceOf}). */
  readonly resource: string;
  /**
   * `performance.now()` when the command that last set the lock's lease was sent: the lease
   * counts from no earlier than this.
   */
  validFrom: number;
  /** `performance.now()` past which the lock may have expired (on a quorum of nodes). */
  validUntil: number;
  /**
   * Set by a release on a store whose {@link WaitQueue} grants: the waiter id the key was granted to,
   * or `""` when nobody was queued (nothing was published).
   */
  grantedTo: string | undefined;
  /**
   * Waiters may be queued for the key behind this holder: it was granted from the queue, the
   * attempt that took it saw the queue, callers of its locker wait for the key, or its locker's
   * latest release of the key granted it onward (a key contended a moment ago likely still is).
   * A hint a store may use to choose how it releases; either value releases correctly.
   */
  contended = false;

  constructor(token: string, resource: string, validFrom: number, validUntil: number) {
    this.token = token;
    this.resource = resource;
    this.validFrom = validFrom;
    this.validUntil = validUntil;
  }

  /** Records a successful (re)set of the TTL by a command sent at `sentAt`. */
  renew(sentAt: number, validUntil: number): void {
    this.validFrom = sentAt;
    this.validUntil = validUntil;
  }
}

/** How one attempt relates to the key's {@link WaitQueue} (a store without one ignores it). */
export interface Queueing {
  /** The queue entry the attempt uses: this locker's id, or (counted locks) a waiter's own id. */
  readonly waiterId: string;
  /** On a miss, enter the queue and register this attempt's token for a grant. */
  readonly joinOnMiss: boolean;
  /** On success, leave the queue (the attempt was in it), or leave it as it is. */
  readonly leaveOnSuccess: boolean;
  /** The token of the entry's registration not yet seen granted: take the key if it holds it. */
  readonly grantedToken?: string | undefined;
}

/**
 * A failed attempt that joined the store's queue registered its token there: a release may grant
 * the key to that token. `sentAt` (local, monotonic ms) and `serverMs` (the node's clock when it
 * registered) let the grantee bound when a grant happened without comparing clocks.
 */
export interface Registration {
  readonly token: string;
  /** Permits the registered attempt asked for (1 for a lock). */
  readonly weight: number;
  readonly sentAt: number;
  readonly serverMs: number;
}

/** One acquisition attempt, as the core asks a backend for it. */
export interface AttemptRequest {
  /** The store's name for the key (see {@link Naming.resourceOf}). */
  readonly resource: string;
  /** The lease length in ms. */
  readonly duration: number;
  /** How the attempt relates to the key's queue in the store. */
  readonly queueing: Queueing;
  /** The grant carries a fencing token issued in the same atomic step (see {@link Fencing}). */
  readonly fencing: boolean;
  /** Permits to take (1 for a lock; see {@link Capabilities.permits}). */
  readonly weight: number;
}

/** Result of one acquisition attempt. */
export type AttemptOutcome =
  | { readonly kind: "acquired"; readonly handle: LockHandle; readonly fencingToken?: bigint }
  /** The key is held by another token (or granted to another waiter). */
  | { readonly kind: "held"; readonly retryAfterMs?: number; readonly registration?: Registration }
  /** Granted, but too late: its validity ran out before the reply arrived. */
  | { readonly kind: "expired-on-arrival" };

/**
 * Result of one extension: `taken` when the key is gone or has another token, `expired` when the
 * lock's validity had already run out locally (nothing is sent). A transient failure is the error
 * itself (a StoreUnavailableError): the lock may still be held; retry. A `LockLostError` is a loss
 * the store can explain: lost for its `reason`, its `cause` published as the extension's error.
 */
export type ExtendOutcome = "extended" | "taken" | "expired" | Error;

/** The most locks one {@link Backend.extend} call is given. */
export const MAX_EXTEND_BATCH = 256;

/** A grant a release made, as a backend reports it (see {@link BackendEvents.granted}). */
export interface Grant {
  /** The queue entry granted: a locker's id, or (counted locks) a locker's id, a dot, a number. */
  readonly waiterId: string;
  /** The token the entry registered (see {@link Registration}); the key now holds it. */
  readonly token: string;
  /** The store's clock at the grant, in ms (see {@link WaitQueue.grantedHandle}). */
  readonly serverMs: number;
}

/**
 * What a backend tells the core about releases it hears of (from any process). Called
 * synchronously from the backend's own event sources; the core never throws from them.
 */
export interface BackendEvents {
  /** `key` (the caller's key, not the store's name) was released and granted to nobody: try. */
  released(key: string): void;
  /** A release granted `key` to a queue entry (maybe another locker's: then nothing to try yet). */
  granted(key: string, grant: Grant): void;
  /** Notifications may have been missed (a subscriber reconnected): every waiter should try. */
  missed(): void;
  /**
   * The store found the held leases with these tokens gone at once (the session that held them
   * ended): each is declared lost for `reason`, with `cause`. Tokens not held are ignored.
   */
  lost(tokens: ReadonlySet<string>, reason: "taken" | "expired", cause?: unknown): void;
}

/** What the core gives a backend when it makes it. */
export interface BackendContext {
  /** The locker's id in the stores' queues (random, 16 hex characters). */
  readonly waiterId: string;
  /**
   * The locker's `owner` option (at most 256 bytes): a backend stores it with each holder without
   * adding a command to the uncontended path, and {@link Backend.inspect} reads it back.
   */
  readonly owner: string;
  /** Where the backend reports releases. */
  readonly events: BackendEvents;
}

/**
 * How the core learns that a key it waits for may be free. A backend that cannot hear releases
 * at all may watch nothing: the core's safety-net polling then does the waking.
 */
export interface ReleaseWatcher {
  /**
   * Starts hearing releases (or grants) of `resource`, reference-counted; resolves once the
   * subscription is confirmed or could not be (never rejects). Pair every call with {@link unwatch}.
   */
  watch(resource: string): Promise<void>;
  /** Drops one reference taken by {@link watch}. */
  unwatch(resource: string): void;
  /** True while a confirmed subscription covers `resource` (no release can slip by unheard). */
  isWatching(resource: string): boolean;
  /** Stops hearing anything; closes what the backend opened for it. */
  close(): Promise<void>;
}

/** One holder of a resource, as the store sees it (see {@link Backend.inspect}). */
export interface StoredHolder {
  /** The holder locker's `owner` (`""` when the store cannot tell). */
  readonly owner: string;
  /** Permits held (1 for a lock). */
  readonly weight: number;
  /** Time left on its lease as the store sees it, in ms; `Infinity` when it never expires on its own. */
  readonly expiresInMs: number;
  /** Its fencing token, where the store keeps one per holder. */
  readonly fencingToken?: bigint;
}

/** Who holds a resource and how many wait for it, as the store sees it (every process). */
export interface StoredView {
  readonly holders: readonly StoredHolder[];
  /** Waiters the store knows of (0 where it cannot tell). */
  readonly waiting: number;
}

/** A held key as {@link Listing.list} names it: the caller's key and what {@link Backend.inspect} reads. */
export interface ListedResource {
  /** The caller's key (without the locker's prefix). */
  readonly key: string;
  readonly view: StoredView;
}

/**
 * A store, as the lock core drives it: six members. The core owns everything else a lock does
 * (validation, the per-key waiter queue and wait loop, the lease record and its keeping, loss
 * reporting, release outcomes, counts, diagnostics); a backend only talks to its store.
 *
 * - Every method that takes a `resource` gets the name chosen by {@link Naming.resourceOf} (the
 *   key itself for a store without {@link Capabilities.naming}).
 * - Operations that can fail throw (or answer) a `StoreUnavailableError` with the store's error as
 *   `cause`; "someone else holds it" is never an error.
 * - A grant is valid until the handle's `validUntil`, a local monotonic time the backend bounds
 *   conservatively (a store's clock is not a clock two processes share).
 *
 * What a store can do beyond this it says in {@link can}: each capability is one object it
 * provides or leaves out (see {@link Capabilities}).
 */
export interface Backend {
  /**
   * One attempt to take `request.resource` (`request.weight` permits of it) for
   * `request.duration` ms; with `request.fencing`, the grant carries a fencing token issued in the
   * same atomic step. Store failures throw StoreUnavailableError.
   */
  acquire(request: AttemptRequest): Promise<AttemptOutcome>;
  /**
   * Extends each of `handles` (at most {@link MAX_EXTEND_BATCH}) to `duration` ms from now where
   * its token still matches, renewing the handle's validity. Never rejects: the outcome of
   * `handles[i]` is at index `i`.
   */
  extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]>;
  /**
   * Deletes the lock where it still has `handle`'s token (or, with a grant queue, grants it to the
   * next waiter) and publishes the release. Never rejects. `cleanUp`: the core cleans up after
   * something it gave up on (an attempt cut short, a grant nobody takes, a lost lease): the release
   * must run after every command this backend sent before it, and depend on no cache of the store's.
   */
  release(handle: LockHandle, cleanUp?: boolean): Promise<ReleaseOutcome>;
  /** How the core hears of releases. */
  readonly watcher: ReleaseWatcher;
  /**
   * Reads who holds `resource` and how many wait for it, in every process; changes nothing and
   * sends at most a few commands. Store failures throw StoreUnavailableError.
   */
  inspect(resource: string): Promise<StoredView>;
  /** What the store can do beyond the above (see {@link Capabilities}). */
  readonly can: Capabilities;
}

/**
 * What a store can do beyond the six members of {@link Backend}: one member per capability, each
 * left out when the store lacks it (the core then does without, or refuses the call with an
 * UnsupportedError that says why).
 */
export interface Capabilities {
  /** Its own names for keys, and keys it cannot use. Without: the key is its name, every key works. */
  readonly naming?: Naming;
  /** It counts permits: semaphores and read-write locks as well as locks. */
  readonly permits?: boolean;
  /**
   * Its locks stay held until released, whatever their lease (a lock bound to a session or a
   * process): a lease the core declares lost is then released in the store by the core.
   */
  readonly heldUntilReleased?: boolean;
  /** Waiters queue in the store, across processes, and releases may grant to them (see {@link WaitQueue}). */
  readonly queue?: WaitQueue;
  /** Leases can move to another process (see {@link HandOff}); or why they cannot. */
  readonly handOff?: HandOff | Unsupported;
  /** It issues fencing tokens (see {@link Fencing}). */
  readonly fencing?: Fencing | Unsupported;
  /** It lives in this process and answers at once (see {@link InProcess}). */
  readonly inProcess?: InProcess;
  /** It can name its held keys (see {@link Listing}); or why it cannot. */
  readonly listing?: Listing | Unsupported;
}

/** Why a store lacks a capability: the core's refusal (an UnsupportedError) says it. */
export interface Unsupported {
  readonly unsupported: string;
}

/** A store's names for keys (see {@link Capabilities.naming}). */
export interface Naming {
  /** The store's name for `key` (a prefixed key, a path, a hash): asked for once per key state. */
  resourceOf(key: string): string;
  /** Throws an UnsupportedError when `resource` cannot be used for counted locks, before anything is sent. */
  checkPermits?(resource: string): void;
}

/**
 * A queue of waiters across processes: an attempt whose {@link Queueing} says `joinOnMiss`
 * registers its token on a miss (see {@link Registration}), and keeps its place by trying again.
 * Where {@link grants} says so, a release grants the key to the longest-waiting live entry and
 * reports it through {@link BackendEvents.granted}; elsewhere releases are reported through
 * {@link BackendEvents.released} and waiters try, in queue order.
 */
export interface WaitQueue {
  /**
   * True when releases of `resource` grant it to queued waiters (a store may grant some keys only).
   * Left out: releases grant to nobody, and the first in line tries.
   */
  grants?(resource: string): boolean;
  /**
   * The handle of a grant a release made to `registration` at the store's time
   * `grantedServerMs`: valid for the grant grace from then, as bounded locally. Called only for
   * grants the backend reported.
   */
  grantedHandle?(resource: string, registration: Registration, grantedServerMs: number): LockHandle;
  /**
   * Removes `waiterId`'s entry (or what a failed attempt that joined left queued) from `resource`'s
   * queue, and hands the key over at once if it was granted to `grantedToken` (the leaver's
   * registration, not seen granted). Never rejects.
   */
  leaveQueue(resource: string, waiterId: string, grantedToken?: string): Promise<void>;
}

/** A lease handed off by another process, to take over (see {@link HandOff.adopt}). */
export interface AdoptRequest {
  /** The store's name for the key. */
  readonly resource: string;
  /** The token the lease is held with. */
  readonly token: string;
  /** Permits it holds (1 for a lock). */
  readonly weight: number;
  /** The lease length to set, in ms. */
  readonly duration: number;
}

/** Moving a lease to another process: `Lease.handOff` here, `Locker.adopt` there. */
export interface HandOff {
  /** The store and namespace a handle belongs to (such as `"redis:node:" + prefix`): others are refused. */
  readonly scope: string;
  /**
   * Where `request.resource` is still held with `request.token`, replaces that token by a fresh
   * one of this locker (with its owner) and sets a lease of `request.duration` ms, atomically.
   * Answers the new handle; `"taken"` when another token holds it, `"expired"` when nobody does.
   * A fencing token is left as it was. Store failures throw StoreUnavailableError.
   */
  adopt(request: AdoptRequest): Promise<LockHandle | "taken" | "expired">;
  /**
   * Extends `handle` once for a hand-off (instead of {@link Backend.extend}) so that the lease no
   * longer depends on this process, and forgets what the store kept for it here. Without: one
   * extension.
   */
  detach?(handle: LockHandle, duration: number): Promise<ExtendOutcome>;
}

/** Fencing tokens (see {@link Capabilities.fencing}). */
export interface Fencing {
  /** A fencing token for `handle`, or `undefined` when the key no longer holds its token. */
  issueFencingToken(handle: LockHandle): Promise<bigint | undefined>;
  /** Throws an UnsupportedError when `resource` cannot be fenced, before anything is sent. */
  checkFencing?(resource: string): void;
}

/**
 * A store in this process (memory) answers at once: the core's uncontended path then makes no
 * promise. Each member is its {@link Backend} counterpart, answered synchronously.
 */
export interface InProcess {
  acquireNow(request: AttemptRequest): AttemptOutcome;
  releaseNow(handle: LockHandle): ReleaseOutcome;
  /** {@link Fencing.issueFencingToken}, at once (grants are fenced as they are handed over). */
  issueFencingTokenNow(handle: LockHandle): bigint | undefined;
}

/** Naming held keys (see {@link Capabilities.listing}). */
export interface Listing {
  /**
   * Names up to `limit` held resources whose caller's key starts with `prefix`, each with its
   * view (at least one holder), in any order; reads in bounded steps and never blocks the store.
   * Store failures throw StoreUnavailableError.
   */
  list(prefix: string, limit: number): Promise<ListedResource[]>;
}

/** Makes a locker's backend, once the core knows its waiter id and event sink. */
export type BackendFactory = (context: BackendContext) => Backend;
