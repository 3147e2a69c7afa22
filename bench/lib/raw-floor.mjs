/**
 * What the raw Redis floor and every Redis contender share, in a module of its own so that a
 * program counting instructions (bench/instructions.mjs) can use it without loading the
 * contenders' libraries.
 */

/** Lease length used by every contender (ms): RedisLocker's default expiry. */
export const LEASE_MS = 30_000;

/** The floor's compare-and-delete, verbatim from the benchmark brief. */
export const COMPARE_AND_DELETE =
  'if redis.call("get",KEYS[1])==ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end';
