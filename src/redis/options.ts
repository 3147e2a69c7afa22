import { DEFAULT_EXPIRY_MS } from "../core/limits.js";
import { InvalidArgumentError, type LockLostError } from "../errors.js";
import { resolveBackoff, resolveOperationTimeout } from "../internal/lease-options.js";
import {
  snapshotOptions,
  validateExpiry,
  validateFunction,
  validateOptionsObject,
  validatePositiveInteger,
} from "../internal/validate.js";
import { clientKind } from "./client/connection-of.js";
import type { RedisClient } from "./types.js";

/**
 * Options of {@link RedisLocker}. Every one is optional; `undefined` means the default, `null` and
 * unknown names are rejected.
 */
export interface RedisLockerOptions {
  /**
   * Lease length in milliseconds (default `30_000`, at least `200`). A held lock is extended every
   * `expiry / 2`; a lock whose holder died expires after at most this long.
   */
  expiry?: number | undefined;
  /** Prepended to every key to form the Redis key (default `"globallock:"`; may be empty). */
  prefix?: string | undefined;
  /**
   * Timeout of every Redis command the locker sends, in ms (default `min(2000, expiry / 4)`; must
   * be below `expiry / 2` and at most 2147483647, the longest Node.js timer delay). A node that does
   * not answer in time counts as failed. The timeout measures the node's silence, not this
   * process's business: an answer already waiting in the socket always wins; time this process's
   * event loop spent stalled (a burst of calls, a long GC pause) does not count; and a single node
   * that keeps answering this connection's earlier commands is busy, not down.
   */
  operationTimeout?: number | undefined;
  /** Clock drift allowance as a fraction of `expiry` (default `0.01`, as redlock). */
  driftFactor?: number | undefined;
  /**
   * Safety-net wait of a blocked `lock` between attempts when no release notification arrives, in
   * ms: jittered exponential from `min` to `max` (default `{ min: 50, max: 1000 }`, or `max = min`
   * when only a larger `min` is given; `max` capped at `expiry / 2`; both at most 2147483647).
   * Catches the expiry of a crashed holder's lock and lost notifications.
   */
  backoff?:
    | {
        /** Shortest wait between attempts, in ms. */
        min?: number | undefined;
        /** Longest wait between attempts, in ms. */
        max?: number | undefined;
      }
    | undefined;
  /**
   * Maximum number of extension commands in flight at once (default `256`); each command extends
   * up to 256 locks of one node (one Cluster hash tag).
   */
  sweepConcurrency?: number | undefined;
  /**
   * Called (synchronously, errors swallowed) when a held lock is found lost: an extension saw its
   * key gone or owned by another token, or its validity ran out without a successful extension.
   * The holder is not cancelled; this is how it can find out.
   */
  onLockLost?: ((error: LockLostError) => void) | undefined;
}

/** {@link RedisLockerOptions} with every default filled in and validated. */
export interface ResolvedRedisLockerOptions {
  /** Lease length in ms. */
  readonly expiry: number;
  /** Prepended to every key. */
  readonly prefix: string;
  /** Timeout of every command, in ms. */
  readonly operationTimeout: number;
  /** Clock drift allowance, a fraction of the lease. */
  readonly driftFactor: number;
  /** Shortest safety-net wait between attempts, in ms. */
  readonly backoffMin: number;
  /** Longest safety-net wait between attempts, in ms. */
  readonly backoffMax: number;
  /** Extension commands in flight at most. */
  readonly sweepConcurrency: number;
  /** The hook called when a held lock is found lost. */
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
}

export { MIN_EXPIRY_MS } from "../core/limits.js";

/** The names {@link resolveOptions} accepts, in the order its error messages list them. */
const OPTION_NAMES = [
  "expiry",
  "prefix",
  "operationTimeout",
  "driftFactor",
  "backoff",
  "sweepConcurrency",
  "onLockLost",
] as const satisfies ReadonlyArray<keyof RedisLockerOptions>;

/**
 * Validates `options` and fills in the defaults. Each option (and each of `backoff`'s) is read
 * exactly once; unknown names and `null` values are rejected. Throws {@link InvalidArgumentError}.
 */
export function resolveOptions(options: RedisLockerOptions | undefined): ResolvedRedisLockerOptions {
  const given = snapshotOptions("options", options, OPTION_NAMES);
  const expiry = given.expiry === undefined ? DEFAULT_EXPIRY_MS : given.expiry;
  validateExpiry("options.expiry", expiry);
  const prefix = given.prefix === undefined ? "globallock:" : given.prefix;
  if (typeof prefix !== "string") throw new InvalidArgumentError("options.prefix", "a string", prefix);
  const operationTimeout = resolveOperationTimeout(given.operationTimeout, expiry);
  const driftFactor = given.driftFactor === undefined ? 0.01 : given.driftFactor;
  if (typeof driftFactor !== "number" || !(driftFactor >= 0 && driftFactor < 0.5)) {
    throw new InvalidArgumentError("options.driftFactor", "a number in [0, 0.5)", driftFactor);
  }
  const [backoffMin, backoffMax] = resolveBackoff(given.backoff, expiry);
  const sweepConcurrency = given.sweepConcurrency === undefined ? 256 : given.sweepConcurrency;
  validatePositiveInteger("options.sweepConcurrency", sweepConcurrency);
  const onLockLost = given.onLockLost;
  if (onLockLost !== undefined) validateFunction("options.onLockLost", onLockLost);
  return {
    expiry,
    prefix,
    operationTimeout,
    driftFactor,
    backoffMin,
    backoffMax,
    sweepConcurrency,
    onLockLost: onLockLost as ((error: LockLostError) => void) | undefined,
  };
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
 * A copy of `options` (read once, property by property) whose `prefix` defaults to `prefix`:
 * counted locks default to their own prefixes, so their keys never collide with locks' keys.
 */
export function withDefaultPrefix(options: unknown, prefix: string): RedisLockerOptions {
  validateOptionsObject("options", options);
  const copy: RedisLockerOptions = { ...(options as RedisLockerOptions | undefined) };
  if (copy.prefix === undefined) copy.prefix = prefix;
  return copy;
}
