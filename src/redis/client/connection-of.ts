import type { RedisClient } from "../types.js";
import { IoRedisConnection, type IoRedisLike } from "./ioredis-connection.js";
import { type NodeRedisClientLike, type NodeRedisClusterLike, NodeRedisConnection } from "./node-redis-connection.js";
import type { RedisConnection } from "./redis-connection.js";

/** What kind of client a value is, told apart by its shape (no library is imported for it). */
export type ClientKind = "ioredis" | "node-redis" | "node-redis-cluster" | "node-redis-sentinel";

/**
 * Tells the accepted clients apart by shape: an ioredis `Redis` or `Cluster` (or iovalkey's, the
 * fork keeps the API) has `evalsha` and `duplicate` (as the lockers have always checked); a node-redis client, cluster or sentinel has
 * `sendCommand`, `subscribe`, `connect` and a boolean `isOpen`, a cluster also `nodeClient`, a
 * sentinel `getMasterNode` and `getSentinelNode`; a client or cluster of v5 or later also has
 * `duplicate` and `destroy` (v4 has no `destroy`). Anything else is `undefined`.
 */
export function clientKind(value: unknown): ClientKind | undefined {
  if (value === null || typeof value !== "object") return undefined;
  const candidate = value as Record<string, unknown>;
  if (typeof candidate.evalsha === "function" && typeof candidate.duplicate === "function") return "ioredis";
  if (
    typeof candidate.isOpen !== "boolean" ||
    typeof candidate.sendCommand !== "function" ||
    typeof candidate.subscribe !== "function" ||
    typeof candidate.connect !== "function"
  ) {
    return undefined;
  }
  if (typeof candidate.getMasterNode === "function" && typeof candidate.getSentinelNode === "function") {
    return "node-redis-sentinel";
  }
  if (typeof candidate.duplicate !== "function" || typeof candidate.destroy !== "function") return undefined;
  return typeof candidate.nodeClient === "function" ? "node-redis-cluster" : "node-redis";
}

/** The {@link RedisConnection} of a client that `resolveClients` accepted. */
export function connectionOf(client: RedisClient): RedisConnection {
  const kind = clientKind(client);
  if (kind === "ioredis") return new IoRedisConnection(client as unknown as IoRedisLike);
  if (kind === "node-redis") {
    return new NodeRedisConnection({ kind: "client", client: client as unknown as NodeRedisClientLike });
  }
  if (kind === "node-redis-cluster") {
    return new NodeRedisConnection({ kind: "cluster", client: client as unknown as NodeRedisClusterLike });
  }
  throw new TypeError(`Not an accepted Redis client (${kind ?? typeof client})`);
}
