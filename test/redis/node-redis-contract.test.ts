/**
 * The shared contract suites on node-redis (the `redis` package) clients, on real redis-server
 * processes: the lock contract on RedisLocker with a v6 client and a v5 client (RESP3) on one node
 * and with a quorum of three v6 clients, and the semaphore and read-write contracts on a v6 client.
 * The one-node suites share one server; the quorum has its own three.
 */
import { lockerContract } from "../contracts/contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import {
  type NodeRedisDeployment,
  type NodeRedisVersion,
  nodeRedisClient,
  nodeRedisDeployment,
  nodeRedisLockerHarness,
  nodeRedisReadWriteHarness,
  nodeRedisSemaphoreHarness,
} from "../helpers/node-redis.js";
import { startServers, stopServers } from "../helpers/redis.js";

/** Servers started once for the suites that join; every locker connects its own client(s) to them. */
function deployment(nodes: number, version: NodeRedisVersion, resp?: 2 | 3): NodeRedisDeployment {
  return nodeRedisDeployment(async () => {
    const servers = await startServers(nodes);
    return {
      connect: () => Promise.all(servers.map((server) => nodeRedisClient(server, version, resp ? { RESP: resp } : {}))),
      stop: () => stopServers(servers),
    };
  });
}

const v6 = deployment(1, 6);
lockerContract("RedisLocker, node-redis v6 client, one node", () => nodeRedisLockerHarness(v6));
semaphoreContract("RedisSemaphore, node-redis v6 client, one node", () => nodeRedisSemaphoreHarness(v6));
readWriteContract("RedisReadWriteLocker, node-redis v6 client, one node", () => nodeRedisReadWriteHarness(v6));

// v5 with RESP3: the replies must come back in the same shapes as with RESP2.
lockerContract("RedisLocker, node-redis v5 client (RESP3), one node", () =>
  nodeRedisLockerHarness(deployment(1, 5, 3)),
);

lockerContract("RedisLocker, three-node quorum of node-redis v6 clients", () =>
  nodeRedisLockerHarness(deployment(3, 6), false),
);
