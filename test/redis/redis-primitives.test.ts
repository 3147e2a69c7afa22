/**
 * The shared contract suites against RedisSemaphore and RedisReadWriteLocker on one real
 * redis-server: the lock contract unchanged for `limit: 1` and for the write view, plus the
 * semaphore and read-write contracts. (A Redlock quorum is refused by both: redis-semaphore.test.ts.)
 */
import { lockerContract } from "../contracts/contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { startServers, stopServers } from "../helpers/redis.js";
import {
  readWriteHarness,
  SharedDeployment,
  semaphoreAsLockHarness,
  semaphoreHarness,
  writeViewHarness,
} from "../helpers/redis-primitives-harness.js";

const node = new SharedDeployment(async () => {
  const servers = await startServers(1);
  const [server] = servers;
  if (server === undefined) throw new Error("no server");
  return { connect: () => server.client(), stop: () => stopServers(servers) };
});

lockerContract("RedisSemaphore { limit: 1 }, one node", () => semaphoreAsLockHarness(node));
lockerContract("RedisReadWriteLocker write view, one node", () => writeViewHarness(node));
semaphoreContract("RedisSemaphore, one node", () => semaphoreHarness(node));
readWriteContract("RedisReadWriteLocker, one node", () => readWriteHarness(node));
