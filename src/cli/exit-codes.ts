/**
 * Exit statuses of the `globallock` command besides the command's own (see `globallock --help`).
 * They follow the conventions of sysexits.h, timeout(1) and the shells where one exists.
 */
export const EXIT = {
  /** `status`: the key is free. */
  FREE: 1,
  /** Bad usage: an unknown option, a bad value, no command. (EX_USAGE) */
  USAGE: 64,
  /** The store could not be reached: Redis down, the lock directory not writable. (EX_UNAVAILABLE) */
  STORE_UNAVAILABLE: 69,
  /** An unexpected internal error. (EX_SOFTWARE) */
  INTERNAL: 70,
  /** `--no-wait` (or `--wait 0`): someone else holds the lock. (EX_TEMPFAIL) */
  HELD: 75,
  /** `--wait` ran out before the lock was obtained (as timeout(1)). */
  WAIT_TIMED_OUT: 124,
  /** The lock was lost while the command ran, and `--on-lost kill` stopped the command. */
  LOCK_LOST: 125,
  /** The command was found but could not be executed (as the shells). */
  CANNOT_EXECUTE: 126,
  /** The command was not found (as the shells). */
  NOT_FOUND: 127,
  /** Added to a signal's number when the command was killed by it, or we were while waiting. */
  SIGNAL_BASE: 128,
} as const;
