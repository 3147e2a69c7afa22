/**
 * `locker.list(signal, { prefix, limit })`: every held key with its holders and waiters, on every
 * store that can name its keys (memory, etcd, Redis on one node and on a Cluster, lock files),
 * read from another locker than the holder's where the store is shared; limit and prefix
 * honoured, released keys gone, a semaphore's and a read-write locker's holders told apart. Stores
 * that cannot name their keys (PostgreSQL, MySQL: named by a hash of the key) refuse with an
 * UnsupportedError before anything is sent.
 */
import { rmSync } from "node:fs";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CombinedLocker,
  FileLocker,
  FileReadWriteLocker,
  FileSemaphore,
  InvalidArgumentError,
  type Locker,
  LockerClosedError,
  MemoryLocker,
  MemoryReadWriteLocker,
  MemorySemaphore,
  MySqlLocker,
  PostgresLocker,
  type ReadWriteLocker,
  RedisLocker,
  RedisReadWriteLocker,
  RedisSemaphore,
  StoreUnavailableError,
  UnsupportedError,
} from "../../src/index.js";
import { FaultyLocker } from "../../src/testing/index.js";
import { EtcdFixture } from "../helpers/etcd-harness.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { nodeRedisClient, nodeRedisCluster } from "../helpers/node-redis.js";
import { RedisServer, startCluster, stopServers } from "../helpers/redis.js";
import { eventually } from "../helpers/wait.js";
import { uniqueKey } from "./contract.js";

/** What a store's suite is given: lockers on one store (each like another process, where it can be). */
interface ListStore {
  /** A new locker on the store. */
  locker(): Locker;
  /** A new semaphore of `limit` on the store. */
  semaphore(limit: number): Locker;
  /** A new read-write locker on the store. */
  readWrite(): ReadWriteLocker;
  /** True where the lockers share the store across processes (not memory: one locker sees its own). */
  readonly shared: boolean;
}

/** The list suite for one store; `start` runs in beforeAll, `stop` in afterAll. */
function listSuite(name: string, start: () => Promise<ListStore>, stop: () => Promise<void>): void {
  describe(`list: ${name}`, () => {
    let store: ListStore;
    beforeAll(async () => {
      store = await start();
    }, 120_000);
    afterAll(stop, 60_000);

    /** The locker that lists: another one than the holder's where the store is shared. */
    const reader = (holder: Locker): Locker => (store.shared ? store.locker() : holder);

    it("names every held key under the prefix, sorted, with its holder; released keys are gone", async () => {
      const holder = store.locker();
      const base = `${uniqueKey("list")}/`;
      const keys = [`${base}b`, `${base}a`, `${base}c/1`];
      const releases = await Promise.all(keys.map((key) => holder.lock(undefined, key)));
      const lister = reader(holder);
      const listed = await lister.list(undefined, { prefix: base });
      expect(listed.map((info) => info.key)).toEqual([`${base}a`, `${base}b`, `${base}c/1`]);
      for (const info of listed) {
        expect(info.holders).toHaveLength(1);
        expect(info.holders[0]).toMatchObject({ mode: "exclusive", weight: 1 });
        expect(info.holders[0]?.owner).not.toBe("");
        expect(info.holders[0]?.expiresInMs).toBeGreaterThan(0);
        expect(info.waiting).toBe(0);
      }
      expect((await lister.list(undefined, { prefix: `${base}c` })).map((info) => info.key)).toEqual([`${base}c/1`]);
      expect(await lister.list(undefined, { prefix: `${base}zz` })).toEqual([]);
      const limited = await lister.list(undefined, { prefix: base, limit: 2 });
      expect(limited).toHaveLength(2);
      for (const info of limited) expect(keys).toContain(info.key);
      // Without a prefix: every key of the store, ours among them.
      const all = await lister.list(undefined);
      expect(all.map((info) => info.key)).toEqual(expect.arrayContaining(keys));
      const sorted = all.map((info) => info.key);
      expect(sorted).toEqual([...sorted].sort());
      await releases[1]?.();
      expect((await lister.list(undefined, { prefix: base })).map((info) => info.key)).toEqual([
        `${base}b`,
        `${base}c/1`,
      ]);
      await Promise.all(releases.map((release) => release()));
      expect(await lister.list(undefined, { prefix: base })).toEqual([]);
    });

    it("counts the key's waiters", async () => {
      const holder = store.locker();
      const key = uniqueKey("list-wait");
      const release = await holder.lock(undefined, key);
      const waiter = store.shared ? store.locker() : holder;
      const stop = new AbortController();
      const waiting = waiter.lock(stop.signal, key).catch((error: unknown) => error);
      const lister = reader(holder);
      await eventually(async () => (await lister.list(undefined, { prefix: key }))[0]?.waiting === 1, 20_000);
      stop.abort(new Error("done"));
      await waiting;
      await release();
    });

    it("shows a semaphore's holders and a read-write locker's readers and writer", async () => {
      const key = uniqueKey("list-counted");
      const semaphore = store.semaphore(3);
      const first = await semaphore.acquire(undefined, key);
      const second = await semaphore.acquire(undefined, key, { weight: 2 });
      const lister = store.shared ? store.semaphore(3) : semaphore;
      const [info] = await lister.list(undefined, { prefix: key });
      expect(info?.key).toBe(key);
      expect(info?.holders.map((holder) => [holder.mode, holder.weight]).sort()).toEqual([
        ["shared", 1],
        ["shared", 2],
      ]);
      await first.release();
      await second.release();
      expect(await lister.list(undefined, { prefix: key })).toEqual([]);

      const rwKey = uniqueKey("list-rw");
      const rw = store.readWrite();
      const readers = [await rw.read.acquire(undefined, rwKey), await rw.read.acquire(undefined, rwKey)];
      const rwLister = store.shared ? store.readWrite() : rw;
      const [read] = await rwLister.read.list(undefined, { prefix: rwKey });
      expect(read?.holders.map((holder) => holder.mode)).toEqual(["shared", "shared"]);
      const [asWriter] = await rwLister.write.list(undefined, { prefix: rwKey });
      expect(asWriter?.key).toBe(rwKey);
      expect(asWriter?.holders.map((holder) => holder.mode)).toEqual(["shared", "shared"]);
      await Promise.all(readers.map((lease) => lease.release()));
      const writer = await rw.write.acquire(undefined, rwKey);
      const [written] = await rwLister.read.list(undefined, { prefix: rwKey });
      expect(written?.holders.map((holder) => [holder.mode, holder.weight])).toEqual([["exclusive", 1]]);
      await writer.release();
    });

    it("refuses bad options before anything is sent, and an aborted signal with its reason", async () => {
      const locker = store.locker();
      for (const limit of [0, -1, 1.5, 10_001, Number.NaN, "10", null]) {
        await expect(locker.list(undefined, { limit } as never)).rejects.toMatchObject({
          name: InvalidArgumentError.name,
          argument: "options.limit",
        });
      }
      await expect(locker.list(undefined, { prefix: 5 } as never)).rejects.toMatchObject({
        argument: "options.prefix",
      });
      await expect(locker.list(undefined, { limits: 5 } as never)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(locker.list("no" as never)).rejects.toMatchObject({ argument: "signal" });
      const reason = new Error("stop");
      await expect(locker.list(AbortSignal.abort(reason))).rejects.toBe(reason);
      expect(await locker.list(undefined, { limit: 10_000, prefix: uniqueKey("none") })).toEqual([]);
    });
  });
}

// Memory: the map of one locker's keys (a memory lock is this locker's alone).
{
  const lockers: Array<{ close(): Promise<void> }> = [];
  const keep = <T extends { close(): Promise<void> }>(locker: T): T => {
    lockers.push(locker);
    return locker;
  };
  listSuite(
    "memory",
    async () => ({
      locker: () => keep(new MemoryLocker()),
      semaphore: (limit) => keep(new MemorySemaphore({ limit })),
      readWrite: () => keep(new MemoryReadWriteLocker()),
      shared: false,
    }),
    async () => {
      await Promise.all(lockers.map((locker) => locker.close()));
    },
  );
}

// Lock files: the lock directory read as a stream, each held entry naming its key; every locker
// on the directory is like another process (the tests with one in a child process are in
// test/file/file-list.test.ts).
{
  let directory: string;
  const lockers: Array<{ close(): Promise<void> }> = [];
  const keep = <T extends { close(): Promise<void> }>(locker: T): T => {
    lockers.push(locker);
    return locker;
  };
  listSuite(
    "lock files",
    async () => {
      directory = tempLockDirectory("list-contract");
      return {
        locker: () => keep(new FileLocker({ directory })),
        semaphore: (limit) => keep(new FileSemaphore({ directory, limit })),
        readWrite: () => keep(new FileReadWriteLocker({ directory })),
        shared: true,
      };
    },
    async () => {
      await Promise.all(lockers.map((locker) => locker.close()));
      if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
    },
  );
}

// etcd: range reads of the locker's prefix, keys only, on one real etcd.
{
  let fixture: EtcdFixture;
  listSuite(
    "etcd",
    async () => {
      fixture = await EtcdFixture.start();
      return {
        locker: () => fixture.locker(),
        semaphore: (limit) => fixture.semaphore(limit),
        readWrite: () => fixture.readWrite(),
        shared: true,
      };
    },
    async () => {
      await fixture?.stop();
    },
  );

  describe("list: etcd pages", () => {
    let pages: EtcdFixture;
    beforeAll(async () => {
      pages = await EtcdFixture.start();
    }, 120_000);
    afterAll(async () => {
      await pages?.stop();
    });

    it("reads past many keys and many waiters of one key, and keeps to its own prefix", async () => {
      const holder = pages.locker({ prefix: "mine:" });
      const other = pages.locker({ prefix: "theirs:" });
      // More keys than one range read answers (128), with keys of several lengths.
      const keys = Array.from({ length: 300 }, (_, index) => `k${"x".repeat(index % 7)}${index}`);
      const releases = await Promise.all(keys.map((key) => holder.lock(undefined, key)));
      const foreign = await other.lock(undefined, "k-foreign");
      const semaphore = pages.semaphore(1, { prefix: "mine:" });
      const waiters = new AbortController();
      const waiting = Array.from({ length: 5 }, () =>
        semaphore.acquire(waiters.signal, "k0").catch((error: unknown) => error),
      );
      const lister = pages.locker({ prefix: "mine:" });
      const listed = await lister.list(undefined);
      expect(listed.map((info) => info.key)).toEqual([...keys].sort());
      expect(await lister.list(undefined, { limit: 10 })).toHaveLength(10);
      expect((await lister.list(undefined, { prefix: "kxxxxxx" })).length).toBe(
        keys.filter((key) => key.startsWith("kxxxxxx")).length,
      );
      expect((await other.list(undefined)).map((info) => info.key)).toEqual(["k-foreign"]);
      waiters.abort(new Error("done"));
      await Promise.all(waiting);
      await Promise.all(releases.map((release) => release()));
      await foreign();
      expect(await lister.list(undefined)).toEqual([]);
    }, 60_000);
  });
}

// Redis: SCAN with MATCH and COUNT, on one node and on each master of a Cluster; every locker
// on a client of its own (like another process).
{
  let servers: RedisServer[] = [];
  const clients: Array<Redis | Cluster> = [];
  const lockers: Array<{ close(): Promise<void> }> = [];
  const keep = <T extends { close(): Promise<void> }>(locker: T): T => {
    lockers.push(locker);
    return locker;
  };
  const stop = async (): Promise<void> => {
    await Promise.allSettled(lockers.map((locker) => locker.close()));
    for (const client of clients) client.disconnect();
    await stopServers(servers);
  };
  const redisStore = (client: () => Redis | Cluster): ListStore => {
    const made = (): Redis | Cluster => {
      const one = client();
      one.on("error", () => undefined);
      clients.push(one);
      return one;
    };
    return {
      locker: () => keep(new RedisLocker(made())),
      semaphore: (limit) => keep(new RedisSemaphore(made(), { limit })),
      readWrite: () => keep(new RedisReadWriteLocker(made())),
      shared: true,
    };
  };
  listSuite(
    "Redis, one node",
    async () => {
      const server = await RedisServer.start();
      servers = [server];
      return redisStore(() => new Redis({ port: server.port, host: server.host }));
    },
    stop,
  );
}
{
  let servers: RedisServer[] = [];
  const clusters: Cluster[] = [];
  const lockers: Array<{ close(): Promise<void> }> = [];
  const keep = <T extends { close(): Promise<void> }>(locker: T): T => {
    lockers.push(locker);
    return locker;
  };
  const connect = (): Cluster => {
    const cluster = new Cluster(
      servers.map((server) => ({ host: server.host, port: server.port })),
      { redisOptions: { maxRetriesPerRequest: 1 } },
    );
    cluster.on("error", () => undefined);
    clusters.push(cluster);
    return cluster;
  };
  listSuite(
    "Redis Cluster",
    async () => {
      servers = await startCluster(3);
      return {
        locker: () => keep(new RedisLocker(connect())),
        semaphore: (limit) => keep(new RedisSemaphore(connect(), { limit })),
        readWrite: () => keep(new RedisReadWriteLocker(connect())),
        shared: true,
      };
    },
    async () => {
      await Promise.allSettled(lockers.map((locker) => locker.close()));
      for (const cluster of clusters) cluster.disconnect();
      await stopServers(servers);
    },
  );

  describe("list: Redis, every client and topology", () => {
    let single: RedisServer;
    let quorum: RedisServer[] = [];
    let masters: RedisServer[] = [];
    beforeAll(async () => {
      [single, masters, ...quorum] = await Promise.all([
        RedisServer.start(),
        startCluster(3),
        RedisServer.start(),
        RedisServer.start(),
        RedisServer.start(),
      ]);
    }, 120_000);
    afterAll(async () => {
      await stopServers([single, ...quorum, ...masters].filter((server) => server !== undefined));
    });

    const client = (server: RedisServer): Redis => {
      const one = new Redis({ port: server.port, host: server.host, maxRetriesPerRequest: 1 });
      one.on("error", () => undefined);
      return one;
    };

    it("one node: many keys (past SCAN's COUNT), leaving out queues, fencing counters and a semaphore's sets", async () => {
      const holderClient = client(single);
      const listerClient = client(single);
      const holder = new RedisLocker(holderClient);
      // A semaphore under the lock's prefix: its sets are no lock keys (WRONGTYPE for a lock's read).
      const semaphore = new RedisSemaphore(holderClient, { limit: 2, prefix: "globallock:" });
      const lister = new RedisLocker(listerClient);
      const base = `${uniqueKey("many")}/`;
      const keys = Array.from({ length: 450 }, (_, index) => `${base}${index}`);
      const leases = await Promise.all(keys.map((key) => holder.acquire(undefined, key, { fencing: true })));
      // A hash-tagged key with a waiter: its queue and waiters' mark sit beside it, under the prefix.
      const tagged = `{${base}}tagged`;
      const taggedLease = await holder.acquire(undefined, tagged, { fencing: true });
      const waiter = new RedisLocker(client(single));
      const stopWaiting = new AbortController();
      const waiting = waiter.lock(stopWaiting.signal, tagged).catch((error: unknown) => error);
      await eventually(async () => (await lister.inspect(undefined, tagged)).waiting === 1, 20_000);
      const permit = await semaphore.acquire(undefined, `${base}sem`);
      expect(await listerClient.exists(`globallock:${tagged}:queue`, `globallock:${tagged}:fence`)).toBe(2);

      const listed = await lister.list(undefined, { prefix: base });
      expect(listed.map((info) => info.key)).toEqual([...keys].sort());
      const taggedInfo = await lister.list(undefined, { prefix: "{" });
      expect(taggedInfo.map((info) => [info.key, info.waiting])).toEqual([[tagged, 1]]);
      expect(await lister.list(undefined, { prefix: base, limit: 7 })).toHaveLength(7);
      // Glob characters in the prefix are matched literally.
      expect(await lister.list(undefined, { prefix: `${base}*` })).toEqual([]);
      const [semaphoreInfo] = await new RedisSemaphore(listerClient, { limit: 2, prefix: "globallock:" }).list(
        undefined,
        { prefix: `${base}sem` },
      );
      expect(semaphoreInfo?.holders).toHaveLength(1);

      stopWaiting.abort(new Error("done"));
      await waiting;
      await Promise.all([...leases, taggedLease, permit].map((lease) => lease.release()));
      expect(await lister.list(undefined, { prefix: base })).toEqual([]);
      await Promise.all([holder, semaphore, lister, waiter].map((locker) => locker.close()));
      holderClient.disconnect();
      listerClient.disconnect();
    }, 60_000);

    it("a Cluster: keys on every master are listed", async () => {
      const cluster = new Cluster(
        masters.map((server) => ({ host: server.host, port: server.port })),
        { redisOptions: { maxRetriesPerRequest: 1 } },
      );
      cluster.on("error", () => undefined);
      const locker = new RedisLocker(cluster);
      const base = `${uniqueKey("spread")}/`;
      const keys = Array.from({ length: 60 }, (_, index) => `${base}${index}`);
      const releases = await Promise.all(keys.map((key) => locker.lock(undefined, key)));
      const perNode = await Promise.all(cluster.nodes("master").map((node) => node.dbsize()));
      expect(perNode.filter((count) => count > 0)).toHaveLength(3);
      expect((await locker.list(undefined, { prefix: base })).map((info) => info.key)).toEqual([...keys].sort());
      await Promise.all(releases.map((release) => release()));
      await locker.close();
      cluster.disconnect();
    }, 60_000);

    it("scripts: false, a quorum, and node-redis (a client and a cluster) list too", async () => {
      const opened: Array<{ disconnect?: () => void; close?: () => Promise<unknown> }> = [];
      const scriptless = new RedisLocker(client(single), { scripts: false, prefix: "scriptless:" });
      const quorumLocker = new RedisLocker(quorum.map(client), { prefix: "quorum:" });
      const nodeRedis = await nodeRedisClient(single);
      const nodeCluster = await nodeRedisCluster(masters);
      opened.push(nodeRedis as never, nodeCluster as never);
      const viaNodeRedis = new RedisLocker(nodeRedis as never, { prefix: "node-redis:" });
      const viaNodeCluster = new RedisLocker(nodeCluster as never, { prefix: "node-cluster:" });
      for (const locker of [scriptless, quorumLocker, viaNodeRedis, viaNodeCluster]) {
        const key = uniqueKey("any");
        const lease = await locker.acquire(undefined, key);
        const listed = await locker.list(undefined);
        expect(listed.map((info) => info.key)).toEqual([key]);
        expect(listed[0]?.holders).toHaveLength(1);
        await lease.release();
        expect(await locker.list(undefined)).toEqual([]);
        await locker.close();
      }
      for (const one of opened) await one.close?.();
    }, 60_000);

    it("a quorum lists with a node down; a lone node down is a StoreUnavailableError, within the timeout", async () => {
      const locker = new RedisLocker(quorum.map(client), { prefix: "quorum-down:", operationTimeout: 1000 });
      const key = uniqueKey("down");
      const release = await locker.lock(undefined, key);
      await (quorum[2] as RedisServer).stop();
      expect((await locker.list(undefined)).map((info) => info.key)).toEqual([key]);
      await release();
      await locker.close();

      const lone = await RedisServer.start();
      const alone = new RedisLocker(client(lone), { operationTimeout: 1000 });
      await alone.lock(undefined, uniqueKey("alone"));
      await lone.stop();
      const started = performance.now();
      await expect(alone.list(undefined)).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(performance.now() - started).toBeLessThan(10_000);
      await alone.close();
    }, 60_000);

    it("a closed locker refuses with LockerClosedError", async () => {
      const locker = new RedisLocker(client(single));
      await locker.close();
      await expect(locker.list(undefined)).rejects.toBeInstanceOf(LockerClosedError);
    });
  });
}

describe("list: stores that cannot name their keys", () => {
  it("PostgreSQL and MySQL refuse with an UnsupportedError that says why, sending nothing", async () => {
    // Pools on a port nobody listens on: the refusal comes before any connection.
    const { Pool } = await import("pg");
    const pool = new Pool({ host: "127.0.0.1", port: 1, connectionTimeoutMillis: 200 });
    const mysql = await import("mysql2/promise");
    const mysqlPool = mysql.createPool({ host: "127.0.0.1", port: 1, connectTimeout: 200 });
    const lockers = [new PostgresLocker(pool), new MySqlLocker(mysqlPool)];
    const reasons = [/PostgreSQL advisory locks are named by a hash of the key/, /MySQL user-level locks/];
    try {
      for (const [index, locker] of lockers.entries()) {
        const refusal = await locker.list(undefined).catch((error: unknown) => error);
        expect(refusal).toBeInstanceOf(UnsupportedError);
        expect((refusal as Error).message).toMatch(reasons[index] as RegExp);
        // Bad input is still bad input first.
        await expect(locker.list(undefined, { limit: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
      }
      expect(pool.totalCount).toBe(0);
    } finally {
      await Promise.all(lockers.map((locker) => locker.close()));
      await pool.end();
      await mysqlPool.end();
    }
  });
});

describe("list: wrappers", () => {
  it("a FaultyLocker lists its inner locker's keys; a CombinedLocker the keys its quorum holds", async () => {
    const inner = new MemoryLocker();
    const faulty = new FaultyLocker(inner);
    const key = uniqueKey("list-wrapped");
    const release = await faulty.lock(undefined, key);
    expect((await faulty.list(undefined)).map((info) => info.key)).toEqual([key]);
    await release();

    const first = new MemoryLocker();
    const second = new MemoryLocker();
    const all = new CombinedLocker([first, second]);
    const majority = new CombinedLocker([first, second, new MemoryLocker()], { strategy: "majority" });
    const both = await all.lock(undefined, "both");
    const alone = await first.lock(undefined, "first-only");
    expect((await all.list(undefined)).map((info) => info.key)).toEqual(["both"]);
    expect((await majority.list(undefined)).map((info) => info.key)).toEqual(["both"]);
    const [info] = await all.list(undefined, { prefix: "b" });
    expect(info?.holders).toHaveLength(1);
    await both();
    await alone();
    expect(await all.list(undefined)).toEqual([]);

    // A member that cannot list (a pool on a port nobody listens on: the refusal comes first).
    const { Pool } = await import("pg");
    const pool = new Pool({ host: "127.0.0.1", port: 1, connectionTimeoutMillis: 200 });
    const postgres = new PostgresLocker(pool);
    const refusing = new CombinedLocker([new MemoryLocker(), postgres]);
    await expect(refusing.list(undefined)).rejects.toBeInstanceOf(UnsupportedError);
    await Promise.all([faulty, all, majority, refusing, first, second, postgres].map((locker) => locker.close()));
    await pool.end();
  });
});
