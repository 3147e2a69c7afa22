/**
 * `scripts: false` (issue 44, item 2) keeps the whole Locker contract on a Redis that refuses
 * scripts: an ACL user without @scripting (ioredis and node-redis), a server with EVAL and EVALSHA
 * renamed away, and a Sentinel's master. Every server is started here.
 */
import { Cluster, type Redis } from "ioredis";
import { createClient, createCluster } from "redis";
import { type Locker, RedisLocker, type RedisLockerOptions } from "../../src/index.js";
import type { RedisClient } from "../../src/redis/types.js";
import { type SentinelGroup, startSentinelGroup } from "../../support/redis-server.mjs";
import { type LockerHarness, lockerContract } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { destroyQuietly } from "../helpers/node-redis.js";
import { RedisServer, startCluster, stopServers } from "../helpers/redis.js";

/** The ACL user of the issue: everything but scripting. */
const NO_SCRIPTING = ["on", ">pw", "~*", "&*", "+@all", "-@scripting"];

/** A redis-server whose user "app" may not run scripts (set in its config). */
function startAclServer(): Promise<RedisServer> {
  return RedisServer.start({ config: `user app ${NO_SCRIPTING.join(" ")}\n` });
}

/**
 * A contract harness of scriptless lockers, each on its own new client (like another process);
 * `connect` makes one. `stop` ends what the harness does not own (servers).
 */
function harness(
  connect: () => Promise<{ client: RedisClient; close(): void }>,
  stop: () => Promise<void>,
): LockerHarness {
  const lockers: Locker[] = [];
  const closers: Array<() => void> = [];
  const make = async (options?: { wakeOnly?: boolean }): Promise<Locker> => {
    const { client, close } = await connect();
    closers.push(close);
    const settings: RedisLockerOptions = { scripts: false };
    if (options?.wakeOnly) settings.backoff = { min: 20_000, max: 20_000 };
    const locker = new RedisLocker(client, settings);
    lockers.push(locker);
    return locker;
  };
  return {
    create: make,
    peer: (_locker, options) => make(options),
    fencing: true,
    handOff: true,
    cleanup: async () => {
      await Promise.allSettled(lockers.map((locker) => locker.close()));
      for (const close of closers) close();
      await stop();
    },
  };
}

/** ioredis clients as the user without scripting. */
async function aclHarness(): Promise<LockerHarness> {
  const server = await startAclServer();
  return harness(
    async () => {
      const client: Redis = server.client({ username: "app", password: "pw" });
      return { client, close: () => client.disconnect() };
    },
    () => server.stop(),
  );
}

/** node-redis (v6) clients as the user without scripting. */
async function nodeRedisAclHarness(): Promise<LockerHarness> {
  const server = await startAclServer();
  return harness(
    async () => {
      const client = createClient({
        url: `redis://app:pw@${server.host}:${server.port}`,
        socket: { reconnectStrategy: () => 50 },
      });
      client.on("error", () => undefined);
      await client.connect();
      return { client: client as unknown as RedisClient, close: () => destroyQuietly(client) };
    },
    () => server.stop(),
  );
}

/** A server with EVAL and EVALSHA renamed away (a config file: rename-command cannot be set at run time). */
async function renamedHarness(): Promise<LockerHarness> {
  const server = await RedisServer.start({ config: 'rename-command EVALSHA ""\nrename-command EVAL ""\n' });
  return harness(
    async () => {
      const client: Redis = server.client();
      return { client, close: () => client.disconnect() };
    },
    () => server.stop(),
  );
}

/** Clients that find the master through Sentinels, as the user without scripting. */
async function sentinelHarness(): Promise<LockerHarness> {
  const group: SentinelGroup = await startSentinelGroup();
  const admin = group.master.client();
  try {
    // The user is created on the master and its replica (ACLs are not replicated).
    for (const server of group.servers) {
      const node = server.client();
      await node.call("ACL", "SETUSER", "app", ...NO_SCRIPTING);
      node.disconnect();
    }
  } finally {
    admin.disconnect();
  }
  return harness(
    async () => {
      const client = group.client({ username: "app", password: "pw" });
      return { client, close: () => client.disconnect() };
    },
    () => group.stop(),
  );
}

/** A three-master Cluster whose user "app" may not run scripts on any node. */
async function startAclCluster(): Promise<RedisServer[]> {
  const servers = await startCluster(3);
  for (const server of servers) {
    const node = server.client();
    await node.call("ACL", "SETUSER", "app", ...NO_SCRIPTING);
    node.disconnect();
  }
  return servers;
}

/** ioredis Cluster clients as the user without scripting. */
async function clusterHarness(): Promise<LockerHarness> {
  const servers = await startAclCluster();
  return harness(
    async () => {
      const cluster = new Cluster(
        servers.map((server) => ({ host: server.host, port: server.port })),
        { redisOptions: { username: "app", password: "pw", maxRetriesPerRequest: 1 } },
      );
      cluster.on("error", () => undefined);
      return { client: cluster, close: () => cluster.disconnect() };
    },
    () => stopServers(servers),
  );
}

/** node-redis (v6) cluster clients as the user without scripting. */
async function nodeRedisClusterHarness(): Promise<LockerHarness> {
  const servers = await startAclCluster();
  return harness(
    async () => {
      const cluster = createCluster({
        rootNodes: servers.map((server) => ({ url: server.url })),
        defaults: { username: "app", password: "pw", socket: { reconnectStrategy: () => 50 } },
      });
      cluster.on("error", () => undefined);
      await cluster.connect();
      return { client: cluster as unknown as RedisClient, close: () => destroyQuietly(cluster) };
    },
    () => stopServers(servers),
  );
}

lockerContract("RedisLocker, scripts: false, an ACL user without @scripting", aclHarness);
lockerContract("RedisLocker, scripts: false, node-redis, an ACL user without @scripting", nodeRedisAclHarness);
lockerContract('RedisLocker, scripts: false, rename-command EVAL and EVALSHA ""', renamedHarness);
lockerContract("RedisLocker, scripts: false, a Sentinel's master", sentinelHarness);
lockerContract("RedisLocker, scripts: false, an ioredis Cluster", clusterHarness);
lockerContract("RedisLocker, scripts: false, a node-redis cluster", nodeRedisClusterHarness);
lockAllSuite("RedisLocker, scripts: false", aclHarness);
