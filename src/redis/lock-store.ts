import type { ReleaseOutcome } from "../locker.js";

/** A lock held in Redis: its token, key, and local validity deadline (monotonic ms). */
export class LockHandle {
  /** Random ownership token (32 hex characters = 16 bytes). */
  readonly token: string;
  /** The full Redis key. */
  readonly resource: string;
  /** `performance.now()` past which the lock may have expired (on a quorum of nodes). */
  validUntil: number;
  /** State private to the store that issued the handle (redlock's `Lock` object for a quorum). */
  storeState: unknown;

  constructor(token: string, resource: string, validUntil: number, storeState?: unknown) {
    this.token = token;
    this.resource = resource;
    this.validUntil = validUntil;
    this.storeState = storeState;
  }
}

/** How an attempt relates to the key's cross-process hand-off queue. */
export interface QueueIntent {
  /** This locker's id in the queue. */
  readonly waiterId: string;
  /** Enter the queue on failure (or refresh this waiter's liveness there). */
  readonly join: boolean;
  /** On success: leave the queue, go to its back (more local waiters), or leave it as it is. */
  readonly onSuccess: "leave" | "requeue" | "keep";
}

/** Result of one acquisition attempt. */
export type AttemptOutcome =
  | { readonly kind: "acquired"; readonly handle: LockHandle }
  /** The key is held by another token (or reserved for another waiter). */
  | { readonly kind: "held"; readonly retryAfterMs?: number }
  /** Granted, but too late: its validity ran out before the reply arrived. */
  | { readonly kind: "expired-on-arrival" };

/**
 * Result of one extension attempt: `taken` when the key is gone or has another token, `expired`
 * when the lock's validity had already run out locally (nothing is sent). Transient failures throw
 * a StoreUnavailableError.
 */
export type ExtendOutcome = "extended" | "taken" | "expired";

/** Where locks live: one Redis node or Cluster ({@link SingleNodeStore}) or a Redlock quorum. */
export interface LockStore {
  /** True when releases of `resource` hand it to the next queued waiter (and publish its id). */
  hasQueue(resource: string): boolean;
  /** One attempt to take `resource` for `duration` ms. Store failures throw StoreUnavailableError. */
  acquire(resource: string, duration: number, intent?: QueueIntent): Promise<AttemptOutcome>;
  /** Extends `handle` to `duration` ms from now where its token still matches. */
  extend(handle: LockHandle, duration: number): Promise<ExtendOutcome>;
  /** Compare-and-delete (or hand-off) with publication. Never rejects. */
  release(handle: LockHandle): Promise<ReleaseOutcome>;
  /** Removes `waiterId` from `resource`'s hand-off queue. Never rejects. */
  leaveQueue(resource: string, waiterId: string): Promise<void>;
  /** Whether {@link issueFencingToken} is available. */
  readonly supportsFencing: boolean;
  /** A fencing token for `handle`, or `undefined` when the key no longer holds its token. */
  issueFencingToken(handle: LockHandle): Promise<bigint | undefined>;
  /** Throws an UnsupportedError when `resource` cannot be fenced (before anything is sent). */
  checkFencing(resource: string): void;
}
