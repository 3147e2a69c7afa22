/**
 * The limits every locker checks its options and calls against: one table, so that the same
 * arguments get the same answer on every store.
 */

/**
 * The shortest `expiry` (lease length) any locker accepts, in ms: a lease shorter than about two
 * command round trips could not be extended in time.
 */
export const MIN_EXPIRY_MS = 200;
