import { InvalidArgumentError, UnsupportedError } from "../errors.js";
import { validateOptionsObject, validatePositiveInteger } from "../internal/validate.js";
import type { ResolvedLockerOptions, ServerLockerOptions } from "../locker-options.js";
import { resolveBackoff, resolveOnLockLost, snapshotServerOptions } from "../locker-options.js";
import { clientKind } from "./client/connection-of.js";
import type { RedisClient } from "./types.js";

/**
 * Options of {@link RedisLocker}. Every one is optional; `undefined` means the default, `null` and
 * unknown names are rejected.
 */
export interface RedisLockerOptions extends ServerLockerOptions {
  /** Clock drift allowance as a fraction of `expiry` (default `0.01`, as redlock). */
  driftFactor?: number | undefined;
  /**
   * Maximum number of extension commands in flight at once (default `256`); each command extends
   * up to 256 locks of one node (one Cluster hash tag).
   */
  sweepConcurrency?: number | undefined;
  /**
   * Whether the locker runs Lua scripts (default `true`). `false` is for a Redis that refuses them
   * (an ACL user without `@scripting`, EVAL or EVALSHA renamed away): locks through WATCH/MULTI/EXEC
   * transactions on a connection of the locker's own instead — compare-and-delete and
   * compare-and-extend, fencing tokens included — on one node, a Cluster or a Sentinel's master.
   * It gives up the cross-process grant queue (waiters of other processes hear a release and try
   * again, and poll for a key that expired) and costs a release two round trips. `RedisLocker`
   * only: a Redlock quorum, `RedisSemaphore` and `RedisReadWriteLocker` refuse it with an
   * UnsupportedError.
   */
  scripts?: boolean | undefined;
}

/** {@link RedisLockerOptions} with every default filled in and validated. */
export interface ResolvedRedisLockerOptions extends ResolvedLockerOptions {
  /** Prepended to every key. */
  readonly prefix: string;
  /** Clock drift allowance, a fraction of the lease. */
  readonly driftFactor: number;
  /** Whether the locker runs Lua scripts (see {@link RedisLockerOptions.scripts}). */
  readonly scripts: boolean;
}

export { MIN_EXPIRY_MS } from "../core/limits.js";

/** The Redis options beside the server options, in the order error messages list them. */
const OWN_OPTION_NAMES = [
  "driftFactor",
  "backoff",
  "sweepConcurrency",
  "onLockLost",
  "scripts",
] as const satisfies ReadonlyArray<keyof RedisLockerOptions>;

/**
 * Validates `options` and fills in the defaults. Each option (and each of `backoff`'s) is read
 * exactly once; unknown names and `null` values are rejected. Throws {@link InvalidArgumentError}.
 */
export function resolveOptions(options: RedisLockerOptions | undefined): ResolvedRedisLockerOptions {
  const { given, ...server } = snapshotServerOptions(options, OWN_OPTION_NAMES);
  const driftFactor = given.driftFactor === undefined ? 0.01 : given.driftFactor;
  if (typeof driftFactor !== "number" || !(driftFactor >= 0 && driftFactor < 0.5)) {
    throw new InvalidArgumentError("options.driftFactor", "a number in [0, 0.5)", driftFactor);
  }
  const [backoffMin, backoffMax] = resolveBackoff(given.backoff, server.expiry);
  const sweepConcurrency = given.sweepConcurrency === undefined ? 256 : given.sweepConcurrency;
  validatePositiveInteger("options.sweepConcurrency", sweepConcurrency);
  const onLockLost = resolveOnLockLost(given.onLockLost);
  const scripts = given.scripts === undefined ? true : given.scripts;
  if (typeof scripts !== "boolean") throw new InvalidArgumentError("options.scripts", "a boolean", scripts);
  return {
    ...server,
    driftFactor,
    backoffMin,
    backoffMax,
    sweepConcurrency,
    onLockLost,
    scripts,
  };
}

/**
 * Throws an {@link UnsupportedError} when `options` turn scripts off for a locker that needs them
 * (`locker`, such as `"RedisSemaphore"`; `why` ends the message).
 */
export function refuseScriptless(options: ResolvedRedisLockerOptions, locker: string, why: string): void {
  if (!options.scripts) {
    throw new UnsupportedError(`${locker} needs Lua scripts (${why}); options.scripts: false is for RedisLocker only`);
  }
}

/** What the `clients` argument may be, for error messages. */
const EXPECTED_CLIENT =
  "an ioredis Redis or Cluster, or a connected node-redis client or cluster (createClient() or createCluster() from the redis package, v5 or later)";

/**
 * Validates the `clients` argument: one client or a non-empty array of distinct ones, each an
 * ioredis `Redis` or `Cluster` or a connected node-redis client or cluster (told apart by shape;
 * see {@link clientKind}). ioredis and node-redis clients may be mixed in a quorum: each node is
 * talked to through its own client.
 */
export function resolveClients(clients: unknown): RedisClient[] {
  const list = Array.isArray(clients) ? clients : [clients];
  if (list.length === 0) {
    throw new InvalidArgumentError("clients", `${EXPECTED_CLIENT}, or a non-empty array of them`, clients);
  }
  list.forEach((client, index) => {
    checkClient(Array.isArray(clients) ? `clients[${index}]` : "clients", client);
  });
  if (new Set(list).size !== list.length) {
    throw new InvalidArgumentError("clients", "distinct clients (one per Redis node)", clients);
  }
  // With an even number of nodes a vote can tie (2 for, 2 against), and redlock then never settles
  // the attempt. With an odd number every complete vote has a majority one way or the other.
  if (list.length > 1 && list.length % 2 === 0) {
    throw new InvalidArgumentError("clients", "an odd number of Redis nodes for a quorum (1, 3, 5, …)", clients);
  }
  return list as RedisClient[];
}

/** Throws an {@link InvalidArgumentError} unless `client` (the argument `name`) is a usable client. */
function checkClient(name: string, client: unknown): void {
  const kind = clientKind(client);
  if (kind === undefined) throw new InvalidArgumentError(name, EXPECTED_CLIENT, client);
  if (kind === "node-redis-sentinel") {
    throw new InvalidArgumentError(name, `${EXPECTED_CLIENT}; a node-redis createSentinel() is not supported`, client);
  }
  const candidate = client as { isOpen?: boolean; options?: { keyPrefix?: unknown }; _keyPrefix?: unknown };
  if (kind !== "ioredis" && candidate.isOpen !== true) {
    throw new InvalidArgumentError(name, "a connected node-redis client (await client.connect() first)", client);
  }
  // ioredis and node-redis 6 can prefix every key: the lockers' keys are their own (see `prefix`).
  const keyPrefix = kind === "ioredis" ? candidate.options?.keyPrefix : candidate._keyPrefix;
  if (keyPrefix) {
    throw new InvalidArgumentError(
      `${name}.options.keyPrefix`,
      "no keyPrefix (use the locker's prefix option)",
      keyPrefix,
    );
  }
}

/**
 * Throws an {@link UnsupportedError} when `list` is a Redlock quorum (more than one node): a
 * counted lock (`locker`, such as `"RedisSemaphore"`) needs one node or a Cluster. `why` ends the
 * message.
 */
export function refuseQuorum(list: readonly RedisClient[], locker: string, why = ""): void {
  if (list.length > 1) {
    throw new UnsupportedError(
      `${locker} needs one Redis node or a Cluster, not a Redlock quorum of ${list.length} nodes${why}`,
    );
  }
}

/**
 * A copy of `options` (read once, property by property) whose `prefix` defaults to `prefix`:
 * counted locks default to their own prefixes, so their keys never collide with locks' keys.
 */
export function withDefaultPrefix(options: unknown, prefix: string): RedisLockerOptions {
  validateOptionsObject("options", options);
  const copy: RedisLockerOptions = { ...(options as RedisLockerOptions | undefined) };
  if (copy.prefix === undefined) copy.prefix = prefix;
  return copy;
}
