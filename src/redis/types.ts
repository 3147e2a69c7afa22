/**
 * An ioredis `Redis` or `Cluster` (ioredis 5 or later), or the same of iovalkey (the Valkey
 * project's fork of ioredis: `Valkey`/`Redis`, `Cluster`), described by the members the lockers rely
 * on rather than imported from ioredis, so that these declarations compile without ioredis installed.
 */
export interface IoRedisClient {
  /** The connection's state (`"ready"`, `"reconnecting"`, …). */
  readonly status: string;
  /** True for an ioredis `Cluster`. */
  readonly isCluster: boolean;
  /** EVALSHA. */
  evalsha(...args: never[]): Promise<unknown>;
  /** EVAL. */
  eval(...args: never[]): Promise<unknown>;
  /** A new client with the same options (the lockers' pub/sub connection). */
  duplicate(...args: never[]): unknown;
}

/**
 * A node-redis client or cluster (`createClient()` or `createCluster()` from the `redis` package,
 * v5 or later), connected by the caller (`await client.connect()`). Described by the members the
 * lockers rely on rather than imported from `redis`, so that these declarations compile without
 * `redis` installed.
 */
export interface NodeRedisClient {
  /** True once `connect()` was called, until the client is closed. */
  readonly isOpen: boolean;
  /** Connects (the caller does, before passing the client). */
  connect(): Promise<unknown>;
  /** Sends a raw command. */
  sendCommand(...args: never[]): Promise<unknown>;
  /** A new client with the same options (the lockers' pub/sub connection). */
  duplicate(...args: never[]): unknown;
  /** SUBSCRIBE with a listener. */
  subscribe(...args: never[]): Promise<unknown>;
}

/**
 * A Redis client that the caller created and owns (the locker never closes it): an ioredis (or
 * iovalkey) `Redis` or `Cluster`, or a connected node-redis client or cluster. The lockers tell them apart themselves.
 */
export type RedisClient = IoRedisClient | NodeRedisClient;
