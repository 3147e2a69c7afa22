import type { Capabilities, Fencing, Naming, WaitQueue } from "../backend.js";

/** Why a session-lock store lacks two capabilities, in its own words (see {@link sessionLockCapabilities}). */
export interface SessionLockLimits {
  /** Why a lease cannot move to another process: its lock belongs to a session. */
  readonly handOff: string;
  /** Why held keys cannot be listed: the store names its locks by a hash of the key. */
  readonly listing: string;
}

/** PostgreSQL's advisory locks (see {@link SessionLockLimits}). */
export const POSTGRES_LOCK_LIMITS: SessionLockLimits = {
  handOff: "a PostgreSQL advisory lock belongs to the session (connection) that took it",
  listing: "PostgreSQL advisory locks are named by a hash of the key, so the key cannot be read back",
};

/** MySQL's user-level locks (see {@link SessionLockLimits}). */
export const MYSQL_LOCK_LIMITS: SessionLockLimits = {
  handOff: "a MySQL GET_LOCK lock belongs to the connection that took it",
  listing: "MySQL user-level locks (GET_LOCK) are named by a hash of the key, so the key cannot be read back",
};

/**
 * What a session-lock backend (PostgreSQL's, MySQL's) can do: its own names for keys, fencing, and
 * locks held until released (they live as long as their session); no hand-off and no listing, for
 * the store's `limits`; and what `counted` adds: whether it counts permits, its wait queue.
 */
export function sessionLockCapabilities(
  backend: Naming & Fencing,
  limits: SessionLockLimits,
  counted: { readonly permits?: boolean; readonly queue?: WaitQueue } = {},
): Capabilities {
  return {
    naming: backend,
    heldUntilReleased: true,
    fencing: backend,
    handOff: { unsupported: limits.handOff },
    listing: { unsupported: limits.listing },
    ...counted,
  };
}
