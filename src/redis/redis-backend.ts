import type { BackendFactory } from "../backend.js";
import { connectionOf } from "./client/connection-of.js";
import type { RedisConnection } from "./client/redis-connection.js";
import { ClusterLanes } from "./cluster-lanes.js";
import type { ResolvedRedisLockerOptions } from "./options.js";
import { RedlockStore } from "./redlock-store.js";
import { RedisReleaseWatcher } from "./release-watcher.js";
import { ScriptlessStore } from "./scriptless-store.js";
import { SingleNodeStore } from "./single-node-store.js";
import { type LaneRouter, oneLane, TransactionLane } from "./transaction-lane.js";
import type { RedisClient } from "./types.js";

/**
 * The backend of a Redis locker: one node or a Cluster ({@link SingleNodeStore}), or a Redlock
 * quorum of independent nodes ({@link RedlockStore}, locks only), or without scripts one node or a
 * Cluster ({@link ScriptlessStore}, locks only), with releases heard over pub/sub
 * ({@link RedisReleaseWatcher}).
 *
 * @param list validated clients: one, or one per independent node of a quorum.
 * @param limit permits per key for counted locks; `undefined` for locks.
 */
export function redisBackend(
  list: readonly RedisClient[],
  options: ResolvedRedisLockerOptions,
  limit?: number,
): BackendFactory {
  const { operationTimeout, driftFactor, backoffMax, prefix } = options;
  return ({ waiterId, owner, events }) => {
    // Releases tell this locker of grants on its own channel, so a release wakes the grantee alone.
    const grantChannel = `${prefix}grant:${waiterId}`;
    let hasQueue: (resource: string) => boolean = () => false;
    const watcher = new RedisReleaseWatcher(
      list,
      {
        timeoutMs: operationTimeout,
        lingerMs: backoffMax,
        prefix,
        grantChannel,
        hasQueue: (resource) => hasQueue(resource),
      },
      events,
    );
    const [only] = list;
    if (!options.scripts && only !== undefined) {
      const connection = connectionOf(only);
      const store = new ScriptlessStore(lanesOf(connection, operationTimeout), {
        driftFactor,
        prefix,
        owner,
        cluster: connection.isCluster,
        watcher,
        scanNodes: () => connection.scanNodes(),
        scanTimeout: operationTimeout,
      });
      return store;
    }
    const store =
      list.length === 1 && only !== undefined
        ? new SingleNodeStore(only, {
            commandTimeout: operationTimeout,
            driftFactor,
            grantGrace: Math.max(20, Math.min(250, operationTimeout)),
            livenessWindow: 3 * backoffMax + operationTimeout,
            limit,
            grantChannel,
            prefix,
            owner,
            watcher,
          })
        : new RedlockStore(list, { commandTimeout: operationTimeout, driftFactor, prefix, owner, watcher });
    const queue = store.can.queue;
    if (queue?.grants !== undefined) hasQueue = (resource) => queue.grants?.(resource) === true;
    return store;
  };
}

/** The lanes of a locker without scripts (see transaction-lane.ts): one node's, or a Cluster's masters'. */
function lanesOf(connection: RedisConnection, timeoutMs: number): LaneRouter {
  const nodes = connection.clusterNodes;
  if (nodes !== undefined) return new ClusterLanes(nodes, timeoutMs);
  return oneLane(new TransactionLane(() => connection.openTransactions(), "server", timeoutMs));
}
