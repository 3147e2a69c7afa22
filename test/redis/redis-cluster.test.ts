/** The whole Locker contract against a real three-master Redis Cluster through an ioredis Cluster. */
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisLocker } from "../../src/index.js";
import { lockerContract, uniqueKey } from "../contracts/contract.js";
import { type RedisServer, startCluster, stopServers } from "../helpers/redis.js";
import { eventually } from "../helpers/wait.js";

function connect(servers: RedisServer[]): Cluster {
  const cluster = new Cluster(
    servers.map((s) => ({ host: "127.0.0.1", port: s.port })),
    { redisOptions: { maxRetriesPerRequest: 1 } },
  );
  cluster.on("error", () => undefined);
  return cluster;
}

lockerContract("RedisLocker on a Redis Cluster", async () => {
  const servers = await startCluster(3);
  const clusters: Cluster[] = [];
  const lockers: RedisLocker[] = [];
  const create = async (options?: { wakeOnly?: boolean }): Promise<RedisLocker> => {
    const cluster = connect(servers);
    clusters.push(cluster);
    const locker = new RedisLocker(cluster, options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {});
    lockers.push(locker);
    return locker;
  };
  return {
    create,
    peer: (_locker, options) => create(options),
    fencing: true,
    handOff: true,
    async cleanup() {
      await Promise.allSettled(lockers.map((l) => l.close()));
      for (const cluster of clusters) cluster.disconnect();
      await stopServers(servers);
    },
  };
});

describe("RedisLocker on a Redis Cluster", () => {
  let servers: RedisServer[];
  let cluster: Cluster;
  beforeAll(async () => {
    servers = await startCluster(3);
    cluster = connect(servers);
  });
  afterAll(async () => {
    cluster?.disconnect();
    await stopServers(servers ?? []);
  });

  it("spreads keys over the masters and extends them", async () => {
    // A lease long enough that a loaded machine's stalls cannot make one run out before the keeper
    // extends it (at half the lease): the test waits for the extensions, not for a fixed time.
    const locker = new RedisLocker(cluster, { expiry: 2000 });
    const keys = Array.from({ length: 30 }, () => uniqueKey());
    const releases = await Promise.all(keys.map((key) => locker.lock(undefined, key)));
    const perNode = await Promise.all(cluster.nodes("master").map((node) => node.dbsize()));
    expect(perNode.filter((n) => n > 0).length).toBeGreaterThan(1);
    await eventually(() => locker.leaseStats.extensions >= keys.length, 20_000);
    for (const key of keys) expect(await cluster.pttl(`globallock:${key}`)).toBeGreaterThan(0);
    await Promise.all(releases.map((release) => release()));
    await locker.close();
  });
});
