/**
 * What the Redis lockers need of a Redis client, whichever library made it: the one interface the
 * script runner and the release notifier talk to. Adapters: ioredis-connection.ts (ioredis `Redis`
 * and `Cluster`) and node-redis-connection.ts (node-redis v5 and later, `createClient()` and
 * `createCluster()`); connection-of.ts tells the clients apart.
 *
 * Script replies come back as ioredis gives them: integers as numbers, bulk and status strings as
 * strings, arrays as arrays, nil (and Lua `false`) as `null`.
 */

/** A script argument: ioredis sends numbers as they are; node-redis gets them as decimal strings. */
export type ScriptArgument = string | number;

/** One Redis node or Cluster, through the caller's client (which the locker never closes). */
export interface RedisConnection {
  /** True for a Cluster client: a script may only touch keys of one slot, and routes by its first key. */
  readonly isCluster: boolean;
  /**
   * Why a command sent now could not be sent at once (reconnecting, closed), or `undefined` while
   * the connection is up. A quorum fails such a node at once instead of queueing behind it.
   */
  unavailableReason(): string | undefined;
  /** EVALSHA; rejects with a `NOSCRIPT …` error when the node does not have the script cached. */
  evalsha(sha: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown>;
  /** EVAL with the script's body. */
  eval(source: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown>;
  /**
   * `SET key value PX ttlMs NX`: resolves to `"OK"` when the key was set, `null` when it existed.
   * (The lean first attempt on a free key: no script, no queue keys.)
   */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<unknown>;
  /**
   * `ZREM key member other`: resolves to the number of the two members removed. (The lean release
   * of permits: a holder and its queue mark, see permit-scripts.ts.)
   */
  removeMembers(key: string, member: string, other: string): Promise<unknown>;
  /** SCRIPT LOAD (on a Cluster: one node). */
  scriptLoad(source: string): Promise<unknown>;
  /**
   * A new connection for pub/sub, made from the caller's client (same address, credentials and
   * TLS; for a Cluster, ioredis duplicates the cluster, node-redis one master's client: a PUBLISH
   * reaches every node) and owned by the caller of this method, who closes it. It connects on its own.
   */
  duplicateForPubSub(events: SubscriberEvents): SubscriberConnection;
}

/** What a {@link SubscriberConnection} reports. */
export interface SubscriberEvents {
  /** A message on a subscribed channel. */
  onMessage(channel: string, message: string): void;
  /**
   * The connection came back after a disconnection and its subscriptions were renewed: messages
   * sent meanwhile were missed.
   */
  onReconnect(): void;
}

/** A pub/sub connection (see {@link RedisConnection.duplicateForPubSub}). */
export interface SubscriberConnection {
  /** Subscribes to `channel`; resolves once a node confirmed it. */
  subscribe(channel: string): Promise<void>;
  /** Unsubscribes from `channel`. */
  unsubscribe(channel: string): Promise<void>;
  /** Closes the connection at once (pending subscriptions fail). Never throws. */
  close(): void;
}

/** True for a Redis `NOSCRIPT` error reply (the script is not in the node's cache), from either client. */
export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/** Swallows an error (connection errors surface as failed commands or lost wake-ups instead). */
export function ignore(): undefined {
  return undefined;
}
