import type { ResolvedLockerOptions, ServerLockerOptions } from "../locker-options.js";
import { resolveSharedServerOptions } from "../lockers/shared-server-options.js";

/**
 * Options of {@link MemcachedLocker}: those of every locker, and `prefix`. Every one is optional;
 * `undefined` means the default, `null` and unknown names are rejected.
 *
 * - `expiry` is the lease, extended every `expiry / 2`. Memcached counts TTLs in whole seconds on a
 *   clock that ticks once a second, so an item is written with the lease rounded up to seconds,
 *   plus two: a dead holder's lock is freed 0 to 3 s after its lease ran out. It is also how long
 *   a restarted or flushed Memcached grants nothing under the prefix (see `MemcachedLocker`).
 * - `prefix` (default `"globallock:"`) comes before every key; printable ASCII without spaces or
 *   `$`, at most 206 bytes together with the client's `namespace`.
 * - `operationTimeout` bounds every command, whatever the client's own retry settings.
 */
export interface MemcachedLockerOptions extends ServerLockerOptions {}

/** {@link MemcachedLockerOptions} with every default filled in and validated. */
export interface ResolvedMemcachedLockerOptions extends ResolvedLockerOptions {
  /** Comes before every key. */
  readonly prefix: string;
}

/** Extension calls in flight at once (each extends its batch one item at a time, concurrently). */
const SWEEP_CONCURRENCY = 4;

/**
 * Validates `options` and fills in the defaults; each option is read exactly once. Throws
 * `InvalidArgumentError`. (The prefix's characters are checked with the client's namespace.)
 */
export function resolveMemcachedOptions(options: unknown): ResolvedMemcachedLockerOptions {
  return resolveSharedServerOptions(options, SWEEP_CONCURRENCY);
}
