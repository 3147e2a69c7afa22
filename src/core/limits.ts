/**
 * The limits every locker checks its options and calls against: one table, so that the same
 * arguments get the same answer on every store (test/contracts/outcome-matrix.test.ts holds them to it).
 */

/** Longest accepted key, in UTF-8 bytes (before a store adds its prefix). */
export const MAX_KEY_BYTES = 1024;

/**
 * Longest delay a Node.js timer accepts, in ms (2^31 − 1, about 24.8 days). A longer delay is not
 * honoured: Node warns (`TimeoutOverflowWarning`) and fires after 1 ms. Every option used directly
 * as a timer delay is capped here; a lease may be longer (its keeper re-arms for far deadlines).
 */
export const MAX_TIMER_DELAY_MS = 2_147_483_647;

/**
 * The shortest lease (`expiry`, of a locker or of one acquisition) any locker accepts, in ms: an
 * extension every 100 ms with a 50 ms operation timeout. It holds for `autoExtend: false` leases
 * too, so that one lease length means the same everywhere.
 */
export const MIN_EXPIRY_MS = 200;

/** The lease length of a locker that was given none, in ms. */
export const DEFAULT_EXPIRY_MS = 30_000;
