/*
 * The shapes of the core's `inspect`, `handOff` and `adopt` (DESIGN.md "Additions, turn 3"; issue
 * #19), as the etcd backend implements them until they land in core/backend.ts: the same names
 * and members, so that the backend's methods fit the core's interface once it has them.
 */

/** One holder of a resource, as the store sees it. */
export interface StoredHolder {
  /** The holder locker's `owner` (`""` when the store cannot tell). */
  readonly owner: string;
  /** Permits held (1 for a lock). */
  readonly weight: number;
  /** Time left on its lease as the store sees it, in ms. */
  readonly expiresInMs: number;
  /** Its fencing token (the entry's create revision). */
  readonly fencingToken?: bigint;
}

/** Who holds a resource and how many wait for it, as the store sees it (every process). */
export interface StoredView {
  readonly holders: readonly StoredHolder[];
  /** Waiters the store knows of (queued entries of counted locks; 0 for locks). */
  readonly waiting: number;
}

/** A lease handed off by another process, to take over. */
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

/** The scope a handle belongs to, or why leases cannot be handed off. */
export type HandOffSupport = { readonly scope: string } | { readonly unsupported: string };
