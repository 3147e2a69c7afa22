/**
 * The counted Redis lockers on a real three-master Redis Cluster (through an ioredis Cluster):
 * the lock contract unchanged for `RedisSemaphore({ limit: 1 })` and the write view, and the
 * semaphore and read-write contracts; and lockAll over keys in different slots. One Cluster serves
 * every suite of this file.
 */
import { Cluster } from "ioredis";
import { lockerContract } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { startCluster, stopServers } from "../helpers/redis.js";
import {
  lockerHarness,
  readWriteHarness,
  SharedDeployment,
  semaphoreAsLockHarness,
  semaphoreHarness,
  writeViewHarness,
} from "../helpers/redis-primitives-harness.js";

const cluster = new SharedDeployment(async () => {
  const servers = await startCluster(3);
  return {
    connect: () => {
      const client = new Cluster(
        servers.map((server) => ({ host: "127.0.0.1", port: server.port })),
        { redisOptions: { maxRetriesPerRequest: 1 } },
      );
      client.on("error", () => undefined);
      return client;
    },
    stop: () => stopServers(servers),
  };
});

lockerContract("RedisSemaphore { limit: 1 } on a Redis Cluster", () => semaphoreAsLockHarness(cluster));
lockerContract("RedisReadWriteLocker write view on a Redis Cluster", () => writeViewHarness(cluster));
semaphoreContract("RedisSemaphore on a Redis Cluster", () => semaphoreHarness(cluster));
readWriteContract("RedisReadWriteLocker on a Redis Cluster", () => readWriteHarness(cluster));
// Each key is its own lock, so lockAll works across Cluster slots.
lockAllSuite("RedisLocker on a Redis Cluster (keys in different slots)", () => lockerHarness(cluster));
