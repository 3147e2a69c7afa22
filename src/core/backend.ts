import type { ReleaseOutcome } from "../locker.js";

/** A lock held in a store: its token, resource, and local validity window (monotonic ms). */
export class LockHandle {
  /** Its ownership token (random, or the store's own: a counter, a token with a weight). */
  readonly token: string;
  /** The store's name for the key (see {@link Backend.resourceOf}). */
  readonly resource: string;
  /**
   * `performance.now()` when the command that last set the lock's lease was sent: the lease
   * counts from no earlier than this.
   */
  validFrom: number;
  /** `performance.now()` past which the lock may have expired (on a quorum of nodes). */
  validUntil: number;
  /**
   * Set by a release on a store with a hand-off queue: the waiter id the key was handed to, or
   * `""` when nobody was queued (nothing was published).
   */
  handedTo: string | undefined;
  /**
   * Waiters may be queued for the key behind this holder: it was granted from the queue, the
   * attempt that took it saw the queue, callers of its locker wait for the key, or its locker's
   * latest release of the key handed it on to a waiter (a key contended a moment ago likely still
   * is; a release that hands it to nobody ends that). A store whose release has a cheaper path for
   * a key nobody waits for (counted locks on Redis: one ZREM, and a second round trip only when it
   * finds waiters) takes its full path at once instead. A hint: either value releases correctly.
   */
  contended = false;

  constructor(token: string, resource: string, validFrom: number, validUntil: number) {
    this.token = token;
    this.resource = resource;
    this.validFrom = validFrom;
    this.validUntil = validUntil;
  }

  /**
   * {@link resource}, read by an operation on many locks at once (an extension round): a store that
   * caches its names need not keep this one, asked for once among thousands.
   */
  get resourceInBulk(): string {
    return this.resource;
  }

  /** Records a successful (re)set of the TTL by a command sent at `sentAt`. */
  renew(sentAt: number, validUntil: number): void {
    this.validFrom = sentAt;
    this.validUntil = validUntil;
  }
}

/** How an attempt relates to the key's cross-process hand-off queue. */
export interface QueueIntent {
  /** This locker's id in the queue. */
  readonly waiterId: string;
  /** Enter the queue on failure and register this attempt's token for a grant. */
  readonly join: boolean;
  /** On success: leave the queue, or leave it as it is (the attempt was not in it). */
  readonly onSuccess: "leave" | "keep";
  /** The token of this locker's registration not yet seen granted: take the key if it holds it. */
  readonly claimToken?: string | undefined;
}

/**
 * A failed attempt that joined the hand-off queue registered its token there: a release may grant
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

/** Result of one acquisition attempt. */
export type AttemptOutcome =
  | { readonly kind: "acquired"; readonly handle: LockHandle; readonly fencingToken?: bigint }
  /** The key is held by another token (or granted to another waiter). */
  | { readonly kind: "held"; readonly retryAfterMs?: number; readonly registration?: Registration }
  /** Granted, but too late: its validity ran out before the reply arrived. */
  | { readonly kind: "expired-on-arrival" };

/**
 * Result of one extension attempt: `taken` when the key is gone or has another token, `expired`
 * when the lock's validity had already run out locally (nothing is sent). A transient failure is
 * the error itself (a StoreUnavailableError): the lock may still be held; retry. A
 * `LockLostError` is a loss the store can explain: lost for its `reason`, its `cause` published
 * as the extension's error (a session-bound lock whose session was found dead).
 */
export type ExtendOutcome = "extended" | "taken" | "expired" | Error;

/** The most locks one {@link Backend.extendMany} call is given (one script call per node). */
export const MAX_EXTEND_BATCH = 256;

/**
 * A grant a release made, as a backend reports it (see {@link BackendEvents.granted}): the queue
 * entry it names, the token that entry registered, and the store's clock when it was granted.
 */
export interface Grant {
  /** The queue entry granted: a locker's id, or (counted locks) a locker's id, a dot, a number. */
  readonly waiterId: string;
  /** The token the entry registered (see {@link Registration}); the key now holds it. */
  readonly token: string;
  /** The store's clock at the grant, in ms (see {@link Backend.grantedHandle}). */
  readonly serverMs: number;
}

/**
 * What a backend tells the core about releases it hears of (from any process). Called
 * synchronously from the backend's own event sources; the core never throws from them.
 */
export interface BackendEvents {
  /** `key` (the caller's key, not the store's name) was released and granted to nobody: try. */
  released(key: string): void;
  /** A release handed `key` to a queue entry (maybe another locker's: then nothing to try yet). */
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
  /** The locker's id in cross-process hand-off queues (random, 16 hex characters). */
  readonly waiterId: string;
  /**
   * The locker's `owner` option (at most 256 bytes): a backend stores it with each holder without
   * adding a command to the uncontended path (inside the value it already writes, or once per
   * connection), and {@link Backend.inspect} reads it back.
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

/** A held key as {@link Backend.list} names it: the caller's key and what {@link Backend.inspect} reads. */
export interface ListedResource {
  /** The caller's key (without the locker's prefix). */
  readonly key: string;
  readonly view: StoredView;
}

/** A lease handed off by another process, to take over (see {@link Backend.adopt}). */
export interface AdoptRequest {
  /** The store's name for the key (see {@link Backend.resourceOf}). */
  readonly resource: string;
  /** The token the lease is held with. */
  readonly token: string;
  /** Permits it holds (1 for a lock). */
  readonly weight: number;
  /** The lease length to set, in ms. */
  readonly duration: number;
}

/**
 * Whether a store's leases can be handed to another process: the scope a handle belongs to (the
 * store and its namespace, such as `"redis:" + prefix`; a handle of another scope is refused), or
 * why not (a lock tied to its holder's connection or process).
 */
export type HandOffSupport = { readonly scope: string } | { readonly unsupported: string };

/** One acquisition attempt, as the core asks a backend for it (one object per attempt). */
export interface AttemptRequest {
  /** The store's name for the key (see {@link Backend.resourceOf}). */
  readonly resource: string;
  /** The lease length in ms. */
  readonly duration: number;
  /** How the attempt relates to the key's hand-off queue (a store without one may ignore it). */
  readonly intent: QueueIntent;
  /** The grant carries a fencing token issued in the same atomic step. */
  readonly fencing: boolean;
  /** Permits to take (1 for a lock; counted locks only). */
  readonly weight: number;
}

/**
 * A store, as the lock core drives it. The core owns everything else a lock does: validation, the
 * per-key waiter queue and wait loop, the lease record and its keeping, loss reporting, release
 * outcomes, counts and diagnostics. A backend only talks to its store:
 *
 * - Every method that takes a `resource` gets the name the backend chose with {@link resourceOf}.
 * - Operations that can fail throw (or answer) a `StoreUnavailableError` with the store's error as
 *   `cause`; "someone else holds it" is never an error.
 * - A grant is valid until the handle's `validUntil`, a local monotonic time the backend bounds
 *   conservatively (a store's clock is not a clock two processes share).
 * - A backend with a hand-off queue ({@link hasQueue}) registers failed attempts that ask to join
 *   (see {@link QueueIntent}) and has releases grant the key to the longest-waiting live entry,
 *   reporting it through {@link BackendEvents.granted}; the core hands that grant to its waiter.
 *   Without a queue, releases are reported through {@link BackendEvents.released} and waiters try.
 *
 * A store writes a {@link StoreBackend}: the members marked "default" below may be left out, and
 * `withDefaults` (core/backend-defaults.ts) supplies them.
 */
export interface Backend {
  /**
   * The store's name for `key` (a prefixed key, a path, a hash): computed once per key state.
   * Default: the key itself. `once`: asked for once among many keys (an extension round), so a
   * store that caches names need not keep this one.
   */
  resourceOf(key: string, once?: boolean): string;
  /** True when the store counts permits (semaphores, read-write locks) besides plain locks. */
  readonly countsPermits: boolean;
  /**
   * `false` when a lock stays held until released, whatever its lease (a lock bound to a session
   * or a process): a lease the core declares lost (its deadline passed) is then released in the
   * store by the core, so the key is freed. Default: locks expire on their own (a TTL).
   */
  readonly expires?: boolean;
  /**
   * True when releases of `resource` hand it to the next queued waiter (and publish its id).
   * Default: `false` (no hand-off queue).
   */
  hasQueue(resource: string): boolean;
  /** How the core hears of releases. */
  readonly watcher: ReleaseWatcher;
  /**
   * One attempt to take `request.resource` (`request.weight` permits of it, for counted locks) for
   * `request.duration` ms; with `request.fencing`, the grant carries a fencing token issued in the
   * same atomic step. Store failures throw StoreUnavailableError.
   */
  acquire(request: AttemptRequest): Promise<AttemptOutcome>;
  /**
   * A store in this process (memory) may also answer an attempt synchronously: the same as
   * {@link acquire}, without a promise (the core's uncontended path then allocates none).
   */
  acquireNow?(request: AttemptRequest): AttemptOutcome;
  /**
   * Throws an UnsupportedError when `resource` cannot be used by this store (before anything is
   * sent). Default: every resource can.
   */
  checkResource(resource: string): void;
  /**
   * Extends each of `handles` (at most {@link MAX_EXTEND_BATCH}) to `duration` ms from now where
   * its token still matches, renewing the handle's validity. Never rejects: the outcome of
   * `handles[i]` is at index `i`.
   */
  extendMany(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]>;
  /**
   * Compare-and-delete (or hand-off) with publication. Never rejects. `ordered`: the release
   * compensates for an earlier command on the same connection (an attempt that timed out or was
   * abandoned); it must run after that command and must not depend on a script cache. `now`:
   * `performance.now()` as the caller read it just before the call, for a store that reads the
   * clock to release (a clock read saved); a store reads its own when it is not given.
   */
  release(handle: LockHandle, ordered?: boolean, now?: number): Promise<ReleaseOutcome>;
  /** Like {@link acquireNow}: {@link release}, answered synchronously (a store in this process). */
  releaseNow?(handle: LockHandle): ReleaseOutcome;
  /**
   * The handle of a grant a release made to `registration` (see {@link Registration}) at the
   * store's time `grantedServerMs`: valid for the hand-off grace from then, as bounded locally.
   * Called only for grants the backend reported. Default: throws (a store without a hand-off
   * queue reports none).
   */
  grantedHandle(resource: string, registration: Registration, grantedServerMs: number): LockHandle;
  /**
   * Removes `waiterId` from `resource`'s hand-off queue (or whatever a failed attempt that joined
   * left queued), and hands the key over at once if it was granted to `claimToken` (the leaver's
   * registration, not seen granted). Never rejects. Default: nothing to leave.
   */
  leaveQueue(resource: string, waiterId: string, claimToken?: string): Promise<void>;
  /**
   * Reads who holds `resource` and how many wait for it, in every process; changes nothing and
   * sends at most a few commands. Store failures throw StoreUnavailableError.
   */
  inspect(resource: string): Promise<StoredView>;
  /**
   * Names up to `limit` held resources whose caller's key starts with `prefix`, each with its
   * view (at least one holder), in any order; reads in bounded steps and never blocks the store.
   * Store failures throw StoreUnavailableError. Default: rejects with an UnsupportedError (a store
   * that cannot name its keys writes its own, saying why).
   */
  list(prefix: string, limit: number): Promise<ListedResource[]>;
  /** Whether leases can be handed to another process (see {@link adopt}). Default: unsupported. */
  readonly handOff: HandOffSupport;
  /**
   * Takes over a lease another process handed off: atomically, where `request.resource` is still
   * held with `request.token`, replaces that token by a fresh one of this locker (with its owner)
   * and sets a lease of `request.duration` ms. Answers the new handle; `"taken"` when another
   * token holds it, `"expired"` when nobody does. A fencing token is left as it was. Store
   * failures throw StoreUnavailableError. Default: throws UnsupportedError.
   */
  adopt(request: AdoptRequest): Promise<LockHandle | "taken" | "expired">;
  /**
   * Optional: extends `handle` once for a hand-off (instead of {@link extendMany}) so that the
   * lease no longer depends on this process — a store that records its holder's process (the file
   * store judges a dead holder's lock free) records none — and forgets whatever it kept for it.
   */
  detach?(handle: LockHandle, duration: number): Promise<ExtendOutcome>;
  /** Whether {@link issueFencingToken} is available. */
  readonly supportsFencing: boolean;
  /** A fencing token for `handle`, or `undefined` when the key no longer holds its token. */
  issueFencingToken(handle: LockHandle): Promise<bigint | undefined>;
  /**
   * Like {@link issueFencingToken}, answered synchronously: a store with {@link acquireNow} that
   * supports fencing has it (its grants are fenced as they are handed over).
   */
  issueFencingTokenNow?(handle: LockHandle): bigint | undefined;
  /**
   * Throws an UnsupportedError when `resource` cannot be fenced (before anything is sent).
   * Default: every resource can (when {@link supportsFencing}).
   */
  checkFencing(resource: string): void;
}

/** The members of {@link Backend} a store may leave out (see {@link StoreBackend}). */
export type DefaultedMember =
  | "resourceOf"
  | "hasQueue"
  | "checkResource"
  | "grantedHandle"
  | "leaveQueue"
  | "checkFencing"
  | "handOff"
  | "adopt"
  | "list";

/**
 * A backend as a store writes it: {@link Backend} with the defaulted members optional (a store
 * without a hand-off queue or per-resource limits writes none of them). `withDefaults` makes it
 * a {@link Backend}.
 */
export type StoreBackend = Omit<Backend, DefaultedMember> & Partial<Pick<Backend, DefaultedMember>>;

/** Makes a locker's backend, once the core knows its waiter id and event sink. */
export type BackendFactory = (context: BackendContext) => Backend;
