import { validateOptionsObject } from "../internal/validate.js";
import {
  type ResolvedServerOptions,
  resolveServerOptions,
  type ServerLockerOptions,
  snapshotServerOptions,
} from "../locker-options.js";

/** What a server locker without options of its own reads beside what `snapshotServerOptions` reads. */
const SHARED_OPTION_NAMES = ["backoff", "onLockLost"] as const satisfies ReadonlyArray<keyof ServerLockerOptions>;

/**
 * Validates the options of a server locker that takes only the shared ones (etcd, ZooKeeper,
 * Memcached) and fills in the defaults; each option is read exactly once. Throws
 * `InvalidArgumentError`.
 *
 * @param sweepConcurrency extension calls in flight at once.
 * @param checkPrefix the store's own rule for its prefix, if it has one: it sees the prefix before
 *   `backoff` and `onLockLost` are checked.
 */
export function resolveSharedServerOptions(
  options: unknown,
  sweepConcurrency: number,
  checkPrefix?: (prefix: string) => void,
): ResolvedServerOptions {
  const snapshot = snapshotServerOptions(options, SHARED_OPTION_NAMES);
  checkPrefix?.(snapshot.prefix);
  return resolveServerOptions(snapshot, snapshot.prefix, sweepConcurrency);
}

/**
 * The options bag `options` (validated: an options object or undefined) copied, with `prefix`
 * defaulting to `defaultPrefix`: the caller's bag is never written to.
 */
export function withDefaultPrefix(options: unknown, defaultPrefix: string): ServerLockerOptions {
  validateOptionsObject("options", options);
  const given: ServerLockerOptions = { ...(options as ServerLockerOptions | undefined) };
  if (given.prefix === undefined) given.prefix = defaultPrefix;
  return given;
}
