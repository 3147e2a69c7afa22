import type { ReleaseOutcome } from "../locker.js";

/** A lock held in Redis: its token, key, and local validity window (monotonic ms). */
export class LockHandle {
  /** Random ownership token (32 hex characters = 16 bytes). */
  readonly token: string;
  /** The full Redis key. */
  readonly resource: string;
  /**
   * `performance.now()` when the command that last set the lock's TTL was sent: the TTL counts
   * from no earlier than this.
   */
  validFrom: number;
  /** `performance.now()` past which the lock may have expired (on a quorum of nodes). */
  validUntil: number;
  /**
   * Set by a release on a store with a hand-off queue: the waiter id the key was handed to, or
   * `""` when nobody was queued (nothing was published).
   */
  handedTo: string | undefined;

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
 * the error itself (a StoreUnavailableError): the lock may still be held; retry.
 */
export type ExtendOutcome = "extended" | "taken" | "expired" | Error;

/** The most locks one {@link Backend.extendMany} call is given (one script call per node). */
export const MAX_EXTEND_BATCH = 256;

/** Where locks live: one Redis node or Cluster ({@link SingleNodeStore}) or a Redlock quorum. */
export interface Backend {
  /** True when releases of `resource` hand it to the next queued waiter (and publish its id). */
  hasQueue(resource: string): boolean;
  /**
   * One attempt to take `resource` (`weight` permits of it, for counted locks) for `duration` ms;
   * with `fencing`, the grant carries a fencing token issued in the same atomic step. Store
   * failures throw StoreUnavailableError.
   */
  acquire(
    resource: string,
    duration: number,
    intent?: QueueIntent,
    fencing?: boolean,
    weight?: number,
  ): Promise<AttemptOutcome>;
  /** Throws an UnsupportedError when `resource` cannot be used by this store (before anything is sent). */
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
   * abandoned); it must run after that command and must not depend on the script cache.
   */
  release(handle: LockHandle, ordered?: boolean): Promise<ReleaseOutcome>;
  /**
   * The handle of a grant a release made to `registration` (see {@link Registration}) at the
   * node's time `grantedServerMs`: valid for the hand-off grace from then, as bounded locally.
   */
  grantedHandle(resource: string, registration: Registration, grantedServerMs: number): LockHandle;
  /**
   * Removes `waiterId` from `resource`'s hand-off queue, and hands the key over at once if it was
   * granted to `claimToken` (the leaver's registration, not seen granted). Never rejects.
   */
  leaveQueue(resource: string, waiterId: string, claimToken?: string): Promise<void>;
  /** Whether {@link issueFencingToken} is available. */
  readonly supportsFencing: boolean;
  /** A fencing token for `handle`, or `undefined` when the key no longer holds its token. */
  issueFencingToken(handle: LockHandle): Promise<bigint | undefined>;
  /** Throws an UnsupportedError when `resource` cannot be fenced (before anything is sent). */
  checkFencing(resource: string): void;
}
