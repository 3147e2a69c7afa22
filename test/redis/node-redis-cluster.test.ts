/**
 * RedisLocker on node-redis clusters (`createCluster()` from the `redis` package) against a real
 * three-master Redis Cluster: the whole lock contract through a v6 cluster; keys spread over the
 * masters and kept alive, and wake-on-release through a v5 cluster; waiters that still wake when
 * the cluster's subscriber connection is dropped (v5 and v6). One Cluster serves the whole file.
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisLocker } from "../../src/index.js";
import { lockerContract, uniqueKey } from "../contracts/contract.js";
import {
  destroyQuietly,
  dropSubscribersDuring,
  nodeRedisCluster,
  nodeRedisDeployment,
  nodeRedisLockerHarness,
  type TestNodeRedis,
} from "../helpers/node-redis.js";
import { type RedisServer, startCluster, stopServers } from "../helpers/redis.js";
import { eventually, sleep } from "../helpers/wait.js";

let servers: RedisServer[] = [];
const cluster = nodeRedisDeployment(async () => {
  servers = await startCluster(3);
  return { connect: async () => [await nodeRedisCluster(servers, 6)], stop: () => stopServers(servers) };
});

lockerContract("RedisLocker, node-redis v6 cluster, 3-master Redis Cluster", () => nodeRedisLockerHarness(cluster));

describe("RedisLocker on node-redis clusters", () => {
  let admins: Redis[] = [];
  const clients: TestNodeRedis[] = [];
  const lockers: RedisLocker[] = [];
  beforeAll(async () => {
    await cluster.join();
    admins = servers.map((server) => server.client());
  });
  afterAll(async () => {
    await Promise.allSettled(lockers.map((locker) => locker.close()));
    for (const client of clients) destroyQuietly(client);
    for (const admin of admins) admin.disconnect();
    await cluster.leave();
  });

  async function locker(version: 5 | 6, options = {}): Promise<RedisLocker> {
    const client = await nodeRedisCluster(servers, version);
    clients.push(client);
    const made = new RedisLocker(client, options);
    lockers.push(made);
    return made;
  }

  const wakeOnly = { backoff: { min: 20_000, max: 20_000 } };

  /**
   * Subscribers, on any master, of the grant channel registered in the liveness hash `waiters`
   * ("<deadline>:<token>:<channel>"; 0 while nobody is registered).
   */
  async function registeredListeners(waiters: string): Promise<number> {
    const channel = await registeredChannel(waiters);
    return channel === undefined ? 0 : await listeners(channel);
  }

  /** The grant channel of the first registration in the grant queue `waiters`, if any. */
  async function registeredChannel(waiters: string): Promise<string | undefined> {
    const entries = await Promise.all(admins.map((admin) => admin.hvals(waiters).catch(() => [])));
    const registration = entries.flat()[0];
    return registration?.split(":").slice(2).join(":");
  }

  /** Subscribers of `channel` on every master. */
  async function listeners(channel: string): Promise<number> {
    const counts = await Promise.all(admins.map((admin) => admin.pubsub("NUMSUB", channel)));
    return counts.reduce<number>((sum, reply) => sum + Number((reply as unknown[])[1]), 0);
  }

  it("v5: spreads keys over the masters, extends them, and wakes a waiter on release", async () => {
    const holder = await locker(5, { expiry: 600 });
    const waiter = await locker(5, { expiry: 600, ...wakeOnly });
    const keys = Array.from({ length: 20 }, () => uniqueKey("spread"));
    const releases = await Promise.all(keys.map((key) => holder.lock(undefined, key)));
    const perNode = await Promise.all(admins.map((admin) => admin.dbsize()));
    expect(perNode.filter((count) => count > 0).length).toBeGreaterThan(1);
    const waiting = waiter.lock(AbortSignal.timeout(5000), keys[0] as string);
    await sleep(900); // past the expiry: extended meanwhile
    for (const key of keys.slice(1)) expect((await waiter.tryLock(undefined, key))[0]).toBe(false);
    await Promise.all(releases.map((release) => release()));
    await (await waiting)(); // by the release message (its safety net is 20 s)
  });

  for (const version of [6, 5] as const) {
    it(`v${version}: waiters still wake when the cluster's subscriber connection is dropped`, async () => {
      const holder = await locker(version, wakeOnly);
      const waiter = await locker(version, wakeOnly);
      const key = uniqueKey("cluster-resubscribe");
      const release = await holder.lock(undefined, key);
      const waiting = waiter.lock(AbortSignal.timeout(5000), key);
      // Queued, and listening on the grant channel it registered (where the release will tell it).
      await eventually(async () => (await registeredListeners(`{globallock:${key}}:waiters`)) === 1);
      const channel = (await registeredChannel(`{globallock:${key}}:waiters`)) as string;
      // Drop every subscriber connection on every master and release while they cannot reconnect.
      await dropSubscribersDuring(admins, release);
      const started = performance.now();
      await (await waiting)(); // woken by the reconnection, not the 20 s safety net
      expect(performance.now() - started).toBeLessThan(3000);
      // close() closes the subscriber connection the locker made: nobody listens on its grant
      // channel any more. (Counting every pub/sub connection raced with other lockers' subscribers
      // reconnecting after the drop, on a busy machine.)
      await waiter.close();
      await eventually(async () => (await listeners(channel)) === 0);
      expect(await holder.tryLock(undefined, key)).toEqual([true, expect.any(Function)]);
    });
  }
});
