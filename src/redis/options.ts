import { InvalidArgumentError, type LockLostError } from "../errors.js";
import { validateFunction, validateOptionsObject, validatePositiveInteger } from "../internal/validate.js";
import type { RedisClient } from "./types.js";

/** Options of {@link RedisLocker}. Every one is optional. */
export interface RedisLockerOptions {
  /**
   * Lease length in milliseconds (default `30_000`, at least `200`). A held lock is extended every
   * `expiry / 2`; a lock whose holder died expires after at most this long.
   */
  expiry?: number;
  /** Prepended to every key to form the Redis key (default `"globallock:"`; may be empty). */
  prefix?: string;
  /**
   * Timeout of every Redis command the locker sends, in ms (default `min(2000, expiry / 4)`; must
   * be below `expiry / 2`). A node that does not answer in time counts as failed.
   */
  operationTimeout?: number;
  /** Clock drift allowance as a fraction of `expiry` (default `0.01`, as redlock). */
  driftFactor?: number;
  /**
   * Safety-net wait of a blocked `lock` between attempts when no release notification arrives, in
   * ms: jittered exponential from `min` to `max` (default `{ min: 50, max: 1000 }`, `max` capped at
   * `expiry / 2`). Catches the expiry of a crashed holder's lock and lost notifications.
   */
  backoff?: { min?: number; max?: number };
  /** Maximum number of extensions the sweeper runs at once (default `256`). */
  sweepConcurrency?: number;
  /**
   * Called (synchronously, errors swallowed) when a held lock is found lost: an extension saw its
   * key gone or owned by another token, or its validity ran out without a successful extension.
   * The holder is not cancelled; this is how it can find out.
   */
  onLockLost?: (error: LockLostError) => void;
}

/** {@link RedisLockerOptions} with every default filled in and validated. */
export interface ResolvedRedisLockerOptions {
  readonly expiry: number;
  readonly prefix: string;
  readonly operationTimeout: number;
  readonly driftFactor: number;
  readonly backoffMin: number;
  readonly backoffMax: number;
  readonly sweepConcurrency: number;
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
}

/** Shortest accepted expiry: an extension every 100 ms with a 50 ms command timeout. */
export const MIN_EXPIRY_MS = 200;

/** Validates `options` and fills in the defaults. Throws {@link InvalidArgumentError}. */
export function resolveOptions(options: RedisLockerOptions | undefined): ResolvedRedisLockerOptions {
  validateOptionsObject("options", options);
  const expiry = options?.expiry ?? 30_000;
  validatePositiveInteger("options.expiry", expiry, MIN_EXPIRY_MS);
  const prefix = options?.prefix ?? "globallock:";
  if (typeof prefix !== "string") throw new InvalidArgumentError("options.prefix", "a string", prefix);
  const operationTimeout = options?.operationTimeout ?? Math.min(2000, Math.floor(expiry / 4));
  validatePositiveInteger("options.operationTimeout", operationTimeout);
  if (operationTimeout >= expiry / 2) {
    throw new InvalidArgumentError(
      "options.operationTimeout",
      `a number below expiry / 2 (${expiry / 2})`,
      operationTimeout,
    );
  }
  const driftFactor = options?.driftFactor ?? 0.01;
  if (typeof driftFactor !== "number" || !(driftFactor >= 0 && driftFactor < 0.5)) {
    throw new InvalidArgumentError("options.driftFactor", "a number in [0, 0.5)", driftFactor);
  }
  validateOptionsObject("options.backoff", options?.backoff);
  const backoffMin = options?.backoff?.min ?? 50;
  validatePositiveInteger("options.backoff.min", backoffMin);
  const backoffMax = Math.min(options?.backoff?.max ?? 1000, Math.floor(expiry / 2));
  validatePositiveInteger("options.backoff.max", options?.backoff?.max ?? backoffMax, backoffMin);
  const sweepConcurrency = options?.sweepConcurrency ?? 256;
  validatePositiveInteger("options.sweepConcurrency", sweepConcurrency);
  const onLockLost = options?.onLockLost;
  if (onLockLost !== undefined) validateFunction("options.onLockLost", onLockLost);
  return {
    expiry,
    prefix,
    operationTimeout,
    driftFactor,
    backoffMin,
    backoffMax: Math.max(backoffMin, backoffMax),
    sweepConcurrency,
    onLockLost,
  };
}

/** Validates the `clients` argument: one ioredis client or a non-empty array of distinct ones. */
export function resolveClients(clients: unknown): RedisClient[] {
  const list = Array.isArray(clients) ? clients : [clients];
  if (list.length === 0) {
    throw new InvalidArgumentError("clients", "an ioredis client or a non-empty array of them", clients);
  }
  list.forEach((client, index) => {
    const name = Array.isArray(clients) ? `clients[${index}]` : "clients";
    if (!isRedisClient(client)) throw new InvalidArgumentError(name, "an ioredis Redis or Cluster client", client);
    if (client.options && "keyPrefix" in client.options && client.options.keyPrefix) {
      throw new InvalidArgumentError(
        `${name}.options.keyPrefix`,
        "no keyPrefix (use the locker's prefix option)",
        client.options.keyPrefix,
      );
    }
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

function isRedisClient(value: unknown): value is RedisClient & { options?: { keyPrefix?: string } } {
  if (value === null || typeof value !== "object") return false;
  const candidate = value as Record<string, unknown>;
  return typeof candidate.evalsha === "function" && typeof candidate.duplicate === "function";
}
