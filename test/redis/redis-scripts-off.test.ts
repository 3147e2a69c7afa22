/**
 * `scripts: false` beyond the contract (issue 44): what refuses it, and how its WATCH transactions
 * hold up against a concurrent change, on a real redis-server whose user may not run scripts.
 */
import { Cluster, type Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  InvalidArgumentError,
  LockLostError,
  RedisLocker,
  type RedisLockerOptions,
  RedisReadWriteLocker,
  RedisSemaphore,
  UnsupportedError,
} from "../../src/index.js";
import { connectionOf } from "../../src/redis/client/connection-of.js";
import type { ClusterNodes } from "../../src/redis/client/redis-connection.js";
import { ClusterLanes, clusterSlot } from "../../src/redis/cluster-lanes.js";
import { scriptlessHooks } from "../../src/redis/scriptless-store.js";
import type { RedisClient } from "../../src/redis/types.js";
import { uniqueKey } from "../contracts/contract.js";
import { destroyQuietly } from "../helpers/node-redis.js";
import { RedisServer, startCluster, stopServers } from "../helpers/redis.js";
import { eventually } from "../helpers/wait.js";

/** The ACL user of the issue, in the server's config: everything but scripting. */
const NO_SCRIPTING_USER = "user app on >pw ~* &* +@all -@scripting\n";

let server: RedisServer;
const clients: Redis[] = [];
const nodeClients: Array<{ destroy(): unknown }> = [];
const lockers: RedisLocker[] = [];

beforeAll(async () => {
  server = await RedisServer.start({ config: NO_SCRIPTING_USER });
});
afterAll(async () => {
  await Promise.allSettled(lockers.map((locker) => locker.close()));
  for (const client of clients) client.disconnect();
  for (const client of nodeClients) destroyQuietly(client);
  await server?.stop();
});

/** A new client as the user that may not run scripts. */
function app(): Redis {
  const client = server.client({ username: "app", password: "pw" });
  clients.push(client);
  return client;
}

/** A new client as the default user (any command). */
function admin(): Redis {
  const client = server.client();
  clients.push(client);
  return client;
}

function scriptless(options: RedisLockerOptions = {}): RedisLocker {
  const locker = new RedisLocker(app(), { scripts: false, ...options });
  lockers.push(locker);
  return locker;
}

describe("what refuses scripts: false", () => {
  it("a value that is not a boolean is an InvalidArgumentError naming it, before anything is sent", () => {
    for (const bad of ["no", 0, null]) {
      let caught: unknown;
      try {
        new RedisLocker(app(), { scripts: bad as never });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(InvalidArgumentError);
      expect((caught as InvalidArgumentError).argument).toBe("options.scripts");
      expect((caught as InvalidArgumentError).received).toBe(bad);
    }
  });

  it("a Redlock quorum, RedisSemaphore and RedisReadWriteLocker refuse it with an UnsupportedError naming it", () => {
    expect(() => new RedisLocker([app(), app(), app()], { scripts: false })).toThrow(UnsupportedError);
    expect(() => new RedisLocker([app(), app(), app()], { scripts: false })).toThrow(
      /options\.scripts: false needs one Redis node.*not a Redlock quorum of 3 nodes/,
    );
    expect(() => new RedisSemaphore(app(), { limit: 2, scripts: false })).toThrow(
      /RedisSemaphore needs Lua scripts .*options\.scripts: false is for RedisLocker only/,
    );
    expect(() => new RedisReadWriteLocker(app(), { scripts: false })).toThrow(
      /RedisReadWriteLocker needs Lua scripts .*options\.scripts: false is for RedisLocker only/,
    );
    expect(() => new RedisSemaphore(app(), { limit: 2, scripts: false })).toThrow(UnsupportedError);
  });

  it("scripts: true is the default and refuses such a user at the first attempt; scripts: false locks", async () => {
    const key = uniqueKey();
    const locker = new RedisLocker(app(), { scripts: true });
    lockers.push(locker);
    await expect(locker.tryLock(undefined, key)).rejects.toBeInstanceOf(UnsupportedError);
    expect(await admin().exists(`globallock:${key}`)).toBe(0);
    const lease = await scriptless().acquire(undefined, key);
    expect(await admin().exists(`globallock:${key}`)).toBe(1);
    expect(await lease.releaseWithOutcome()).toBe("released");
    expect(await admin().exists(`globallock:${key}`)).toBe(0);
  });
});

/**
 * Runs `change` once, between the reads and the EXEC of the next transaction on `resource` (the
 * store's test hook; other resources pass through). Resolves when it ran.
 */
function onceBeforeExec(resource: string, change: () => Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    scriptlessHooks.beforeExec = async (seen) => {
      if (seen !== resource) return;
      scriptlessHooks.beforeExec = undefined;
      try {
        await change();
        resolve();
      } catch (error) {
        reject(error);
      }
    };
  });
}

describe("a WATCH aborted by a concurrent change", () => {
  afterEach(() => {
    scriptlessHooks.beforeExec = undefined;
  });

  it("a stale release does not delete the next holder's key: its EXEC is aborted, it reads again and says taken", async () => {
    const locker = scriptless();
    const key = uniqueKey("stale");
    const resource = `globallock:${key}`;
    const lease = await locker.acquire(undefined, key, { autoExtend: false });
    const next = "someone-else/0123456789abcdef0123456789abcdef";
    // Between the release's GET (its own token) and its EXEC, the lease runs out and another
    // holder takes the key: the EXEC must not delete it.
    const changed = onceBeforeExec(resource, async () => {
      await admin().set(resource, next, "PX", 10_000);
    });
    expect(await lease.releaseWithOutcome()).toBe("taken");
    await changed;
    expect(await admin().get(resource)).toBe(next);
    expect(await admin().pttl(resource)).toBeGreaterThan(5000);
  });

  it("a release whose EXEC was aborted by a change that left its token (the same value written again) reads again and releases", async () => {
    const locker = scriptless();
    const key = uniqueKey("rewritten");
    const resource = `globallock:${key}`;
    const lease = await locker.acquire(undefined, key, { autoExtend: false });
    const token = (await admin().get(resource)) as string;
    const changed = onceBeforeExec(resource, async () => {
      await admin().set(resource, token, "KEEPTTL");
    });
    expect(await lease.releaseWithOutcome()).toBe("released");
    await changed;
    expect(await admin().exists(resource)).toBe(0);
  });

  it("an extension aborted by a change does not extend the new holder's key, and reports the lease lost", async () => {
    const locker = scriptless({ expiry: 2000 });
    const key = uniqueKey("extend");
    const resource = `globallock:${key}`;
    const lease = await locker.acquire(undefined, key);
    const next = "someone-else/00000000000000000000000000000000";
    const changed = onceBeforeExec(resource, async () => {
      await admin().set(resource, next, "PX", 60_000);
    });
    await changed; // the keeper's extension, at about half the lease
    const reason = await new Promise<unknown>((resolve) => {
      if (lease.lost.aborted) resolve(lease.lost.reason);
      else lease.lost.addEventListener("abort", () => resolve(lease.lost.reason), { once: true });
    });
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("taken");
    expect(await admin().get(resource)).toBe(next);
    expect(await admin().pttl(resource)).toBeGreaterThan(50_000);
    expect(await lease.releaseWithOutcome()).toBe("taken");
    expect(await admin().get(resource)).toBe(next);
  });

  it("a fenced attempt whose EXEC was aborted by another holder's SET takes nothing, and the fencing counter does not rise", async () => {
    const locker = scriptless();
    const key = uniqueKey("fenced");
    const resource = `globallock:${key}`;
    const counter = `{${resource}}:fence`;
    const first = await locker.acquire(undefined, key, { fencing: true });
    expect(await first.releaseWithOutcome()).toBe("released");
    const before = await admin().get(counter);
    expect(before).toBe(String(first.fencingToken));
    const other = "someone-else/11111111111111111111111111111111";
    const changed = onceBeforeExec(resource, async () => {
      await admin().set(resource, other, "PX", 10_000);
    });
    expect(await locker.tryAcquire(undefined, key, { fencing: true })).toBeUndefined();
    await changed;
    expect(await admin().get(resource)).toBe(other);
    expect(await admin().get(counter)).toBe(before);
    await admin().del(resource);
    const next = await locker.acquire(undefined, key, { fencing: true });
    expect(next.fencingToken).toBeGreaterThan(first.fencingToken as bigint);
    expect(await admin().get(counter)).toBe(String(next.fencingToken));
    await next.release();
  });

  it("an adoption whose EXEC was aborted by another holder's SET is refused (LockLostError) and leaves that holder's key", async () => {
    const locker = scriptless();
    const adopter = scriptless();
    const key = uniqueKey("adopt");
    const resource = `globallock:${key}`;
    const lease = await locker.acquire(undefined, key);
    const handle = await lease.handOff();
    const other = "someone-else/22222222222222222222222222222222";
    const changed = onceBeforeExec(resource, async () => {
      await admin().set(resource, other, "PX", 10_000);
    });
    await expect(adopter.adopt(undefined, handle)).rejects.toBeInstanceOf(LockLostError);
    await changed;
    expect(await admin().get(resource)).toBe(other);
  });

  it("a reconnection between the WATCH and the EXEC aborts the transaction: the DEL never runs unwatched on the new connection", async () => {
    const client = app();
    const locker = new RedisLocker(client, { scripts: false });
    lockers.push(locker);
    const key = uniqueKey("reconnect");
    const resource = `globallock:${key}`;
    const lease = await locker.acquire(undefined, key, { autoExtend: false });
    const other = "someone-else/33333333333333333333333333333333";
    const connectionsOfApp = async (): Promise<number> =>
      ((await admin().client("LIST")) as string).split("\n").filter((line: string) => / user=app /.test(line)).length;
    const connected = await connectionsOfApp();
    const changed = onceBeforeExec(resource, async () => {
      // The watching connection is cut; the key changes meanwhile; every connection of the user
      // is back before the EXEC goes out.
      await admin().client("KILL", "USER", "app");
      await admin().set(resource, other, "PX", 10_000);
      await eventually(async () => (await connectionsOfApp()) >= connected && client.status === "ready", 10_000);
    });
    expect(await lease.releaseWithOutcome()).toBe("taken");
    await changed;
    expect(await admin().get(resource)).toBe(other);
  });

  it("node-redis: a reconnection between the WATCH and the EXEC aborts the transaction too", async () => {
    const client = createClient({
      url: `redis://app:pw@${server.host}:${server.port}`,
      socket: { reconnectStrategy: () => 50 },
    });
    client.on("error", () => undefined);
    await client.connect();
    nodeClients.push(client);
    const locker = new RedisLocker(client as unknown as RedisClient, { scripts: false });
    lockers.push(locker);
    const key = uniqueKey("reconnect-node-redis");
    const resource = `globallock:${key}`;
    const lease = await locker.acquire(undefined, key, { autoExtend: false });
    const other = "someone-else/44444444444444444444444444444444";
    const connectionsOfApp = async (): Promise<number> =>
      ((await admin().client("LIST")) as string).split("\n").filter((line: string) => / user=app /.test(line)).length;
    const connected = await connectionsOfApp();
    const changed = onceBeforeExec(resource, async () => {
      await admin().client("KILL", "USER", "app");
      await admin().set(resource, other, "PX", 10_000);
      await eventually(async () => (await connectionsOfApp()) >= connected && client.isReady, 10_000);
    });
    expect(await lease.releaseWithOutcome()).toBe("taken");
    await changed;
    expect(await admin().get(resource)).toBe(other);
  });
});

describe("on a Cluster", () => {
  let servers: RedisServer[];
  let cluster: Cluster;
  beforeAll(async () => {
    servers = await startCluster(3);
    cluster = new Cluster(
      servers.map((node) => ({ host: node.host, port: node.port })),
      { redisOptions: { maxRetriesPerRequest: 1 } },
    );
    cluster.on("error", () => undefined);
  });
  afterAll(async () => {
    cluster?.disconnect();
    await stopServers(servers ?? []);
  });

  it("a scriptless locker's keys spread over the masters, each released on its own master", async () => {
    const locker = new RedisLocker(cluster, { scripts: false });
    lockers.push(locker);
    const keys = Array.from({ length: 30 }, () => uniqueKey("spread"));
    const leases = await Promise.all(keys.map((key) => locker.acquire(undefined, key, { fencing: true })));
    const perNode = await Promise.all(cluster.nodes("master").map((node) => node.dbsize()));
    expect(perNode.filter((count) => count > 0)).toHaveLength(3);
    expect(await Promise.all(leases.map((lease) => lease.releaseWithOutcome()))).toEqual(keys.map(() => "released"));
    for (const key of keys) expect(await cluster.exists(`globallock:${key}`)).toBe(0);
  });

  it("a key sent to a master that does not serve its slot follows the MOVED answer, for a command and a transaction", async () => {
    await cluster.ping();
    const nodes = connectionOf(cluster).clusterNodes as ClusterNodes;
    const resource = `globallock:${uniqueKey("moved")}`;
    const slot = clusterSlot(resource);
    const right = nodes.masterOf(slot) as string;
    const wrong = cluster
      .nodes("master")
      .map((node) => `${node.options.host}:${node.options.port}`)
      .find((address) => address !== right) as string;
    // A slot table that is out of date for this slot: the first try goes to the wrong master.
    const opened: string[] = [];
    const lying: ClusterNodes = {
      ready: () => nodes.ready(),
      masterOf: (asked) => (asked === slot ? wrong : nodes.masterOf(asked)),
      openTransactions: (address) => {
        opened.push(address);
        return nodes.openTransactions(address);
      },
    };
    const lanes = new ClusterLanes(lying, 2000);
    try {
      expect(await lanes.send(resource, ["SET", resource, "v", "PX", "10000", "NX"])).toBe("OK");
      expect(await cluster.get(resource)).toBe("v");
      const [value, deleted] = await lanes.transaction(resource, async (transaction) => {
        const [read] = await transaction.watch([resource], [["GET", resource]]);
        return [read, await transaction.exec([["DEL", resource]])];
      });
      expect(value).toBe("v");
      expect(deleted).toEqual([1]);
      expect(await cluster.exists(resource)).toBe(0);
      expect(opened).toEqual([wrong, right]); // the MOVED answer was followed, and remembered
    } finally {
      lanes.close();
    }
  });
});
