import { InvalidArgumentError } from "../errors.js";
import type { ResolvedLockerOptions, ServerLockerOptions } from "../locker-options.js";
import { resolveSharedServerOptions, withDefaultPrefix } from "../lockers/shared-server-options.js";
import { isRefusedUnit } from "./layout.js";

/**
 * Options of {@link ZooKeeperLocker} (and its semaphore and read-write locker). Every one is
 * optional; `undefined` means the default, `null` and unknown names are rejected.
 *
 * `expiry` is how long a holder trusts its lease without hearing from ZooKeeper: at most the
 * client's session timeout (an attempt with a longer lease is refused), since ZooKeeper deletes
 * the nodes of a session it has not heard from for that long. A holder that died is freed when its
 * session expires, whatever `expiry` says.
 */
export interface ZooKeeperLockerOptions extends ServerLockerOptions {
  /**
   * The node under which every key's node is made: a ZooKeeper path (it starts with "/", has no
   * empty, "." or ".." part, no trailing "/", none of the characters ZooKeeper refuses, and is
   * neither "/" nor under "/zookeeper"); default `"/globallock"`. Made (with its parents) on first
   * use and never deleted.
   */
  prefix?: string | undefined;
}

/** {@link ZooKeeperLockerOptions} with every default filled in and validated. */
export interface ResolvedZooKeeperLockerOptions extends ResolvedLockerOptions {
  /** The prefix node's path. */
  readonly prefix: string;
}

/** The default `prefix` of a {@link ZooKeeperLocker}. */
export const ZOOKEEPER_PREFIX = "/globallock";

/** Extension batches in flight at once (each is one `exists` per lease, sent together). */
const SWEEP_CONCURRENCY = 4;

/**
 * Validates `options` and fills in the defaults (`prefix`: `defaultPrefix`, by default the
 * locker's {@link ZOOKEEPER_PREFIX}); each option is read exactly once. Throws
 * `InvalidArgumentError`.
 */
export function resolveZooKeeperOptions(
  options: unknown,
  defaultPrefix = ZOOKEEPER_PREFIX,
): ResolvedZooKeeperLockerOptions {
  return resolveSharedServerOptions(withDefaultPrefix(options, defaultPrefix), SWEEP_CONCURRENCY, checkPrefix);
}

/** Throws an InvalidArgumentError naming `prefix` unless it is a ZooKeeper path the lockers may use. */
function checkPrefix(prefix: string): void {
  const parts = prefix.split("/").slice(1);
  const usable =
    prefix.startsWith("/") &&
    !Array.from(prefix, (unit) => unit.charCodeAt(0)).some(isRefusedUnit) &&
    parts.every((part) => part !== "" && part !== "." && part !== "..") &&
    parts[0] !== "zookeeper";
  if (!usable) {
    throw new InvalidArgumentError(
      "options.prefix",
      'a ZooKeeper path such as "/globallock" (starting with "/", no empty, "." or ".." part, no trailing "/", not "/" nor under "/zookeeper")',
      prefix,
    );
  }
}
