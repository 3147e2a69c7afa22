/**
 * `locker.list(signal, { prefix, limit })`: every held key with its holders and waiters, on every
 * store that can name its keys (memory, etcd, Redis on one node and on a Cluster), read from
 * another locker than the holder's where the store is shared; limit and prefix honoured, released
 * keys gone, a semaphore's and a read-write locker's holders told apart. Stores that cannot name
 * their keys (PostgreSQL, MySQL, lock files: named by a hash of the key) refuse with an
 * UnsupportedError before anything is sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CombinedLocker,
  FileLocker,
  InvalidArgumentError,
  type Locker,
  MemoryLocker,
  MemoryReadWriteLocker,
  MemorySemaphore,
  MySqlLocker,
  PostgresLocker,
  type ReadWriteLocker,
  UnsupportedError,
} from "../src/index.js";
import { FaultyLocker } from "../src/testing/index.js";
import { uniqueKey } from "./contract.js";
import { EtcdFixture } from "./helpers/etcd-harness.js";
import { eventually } from "./helpers/wait.js";

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
      expect(await rwLister.write.list(undefined, { prefix: rwKey })).toEqual([read]);
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

describe("list: stores that cannot name their keys", () => {
  it("PostgreSQL, MySQL and lock files refuse with an UnsupportedError that says why, sending nothing", async () => {
    // Pools on a port nobody listens on: the refusal comes before any connection.
    const { Pool } = await import("pg");
    const pool = new Pool({ host: "127.0.0.1", port: 1, connectionTimeoutMillis: 200 });
    const mysql = await import("mysql2/promise");
    const mysqlPool = mysql.createPool({ host: "127.0.0.1", port: 1, connectTimeout: 200 });
    const directory = await import("node:fs/promises").then(({ mkdtemp }) =>
      mkdtemp(`${process.env.TMPDIR ?? "/tmp"}/globallock-list-`),
    );
    const lockers = [new PostgresLocker(pool), new MySqlLocker(mysqlPool), new FileLocker({ directory })];
    const reasons = [
      /PostgreSQL advisory locks are named by a hash of the key/,
      /MySQL user-level locks/,
      /lock files/,
    ];
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
      await import("node:fs/promises").then(({ rm }) => rm(directory, { recursive: true, force: true }));
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

    const directory = await import("node:fs/promises").then(({ mkdtemp }) =>
      mkdtemp(`${process.env.TMPDIR ?? "/tmp"}/globallock-list-`),
    );
    const files = new FileLocker({ directory });
    const refusing = new CombinedLocker([new MemoryLocker(), files]);
    await expect(refusing.list(undefined)).rejects.toBeInstanceOf(UnsupportedError);
    await Promise.all([faulty, all, majority, refusing, first, second, files].map((locker) => locker.close()));
    await import("node:fs/promises").then(({ rm }) => rm(directory, { recursive: true, force: true }));
  });
});
