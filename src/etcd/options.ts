import type { ResolvedLockerOptions, ServerLockerOptions } from "../locker-options.js";
import { resolveSharedServerOptions, withDefaultPrefix } from "../lockers/shared-server-options.js";

/**
 * Options of {@link EtcdLocker} (and its semaphore and read-write lockers). Every one is optional;
 * `undefined` means the default, `null` and unknown names are rejected.
 *
 * `expiry` is the TTL of the locker's etcd lease, rounded up to whole seconds (etcd counts lease
 * TTLs in seconds, and grants at least its own minimum, about 1.5 × its election timeout): a dead
 * holder's locks are freed that long after its last keepalive.
 */
export interface EtcdLockerOptions extends ServerLockerOptions {}

/** {@link EtcdLockerOptions} with every default filled in and validated. */
export interface ResolvedEtcdLockerOptions extends ResolvedLockerOptions {
  /** Prepended to every key. */
  readonly prefix: string;
}

/**
 * Extension commands in flight at once: keepalives of one lease are shared, so this only matters
 * for leases of several lengths (acquisitions with their own `expiry`).
 */
const SWEEP_CONCURRENCY = 4;

/**
 * Validates `options` and fills in the defaults (`prefix`: `defaultPrefix` when given, else
 * `"globallock:"`); each option is read exactly once. Throws `InvalidArgumentError`.
 */
export function resolveEtcdOptions(options: unknown, defaultPrefix?: string): ResolvedEtcdLockerOptions {
  // The locker reads the caller's bag as it is; a default prefix of its own is filled in on a copy.
  const given = defaultPrefix === undefined ? options : withDefaultPrefix(options, defaultPrefix);
  return resolveSharedServerOptions(given, SWEEP_CONCURRENCY);
}
