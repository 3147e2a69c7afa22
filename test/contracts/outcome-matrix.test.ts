/**
 * One outcome everywhere (issue #18): the same arguments give the same result class and error
 * code on every locker. One matrix of acquire options, keys, signals and counts runs over every
 * implementation (servers started here) and is printed; a row may differ from the in-process
 * reference only where {@link EXPECTED_DIFFERENCES} says so, with the reason.
 */
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CombinedLocker,
  EtcdLocker,
  EtcdReadWriteLocker,
  EtcdSemaphore,
  FileLocker,
  FileReadWriteLocker,
  FileSemaphore,
  type Locker,
  MemcachedLocker,
  MemoryLocker,
  MemoryReadWriteLocker,
  MemorySemaphore,
  MySqlLocker,
  MySqlSemaphore,
  MySqlTableLocker,
  MySqlTableReadWriteLocker,
  MySqlTableSemaphore,
  PostgresLocker,
  PostgresReadWriteLocker,
  PostgresSemaphore,
  PostgresTableLocker,
  PostgresTableReadWriteLocker,
  PostgresTableSemaphore,
  type ReadWriteLocker,
  RedisLocker,
  RedisReadWriteLocker,
  RedisSemaphore,
  SqliteLocker,
  SqliteReadWriteLocker,
  SqliteSemaphore,
  ZooKeeperLocker,
  ZooKeeperReadWriteLocker,
  ZooKeeperSemaphore,
} from "../../src/index.js";
import { PgBouncerServer } from "../../support/pgbouncer-server.mjs";
import { EtcdFixture } from "../helpers/etcd-harness.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { MemcachedFixture } from "../helpers/memcached-harness.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { ZooKeeperFixture } from "../helpers/zookeeper-harness.js";
import { uniqueKey } from "./contract.js";

/** One call of the matrix: what it passes (built fresh for every locker). */
interface Row {
  readonly name: string;
  readonly call: (locker: Locker, key: string) => Promise<unknown>;
}

const abortedSignal = (): AbortSignal => AbortSignal.abort(new Error("aborted before the call"));
const tryAcquire =
  (options: unknown, signal?: () => unknown) =>
  (locker: Locker, key: string): Promise<unknown> =>
    locker.tryAcquire(signal?.() as AbortSignal | undefined, key, options as never);

const ROWS: readonly Row[] = [
  // Acquire options.
  { name: "options undefined", call: tryAcquire(undefined) },
  { name: "options {}", call: tryAcquire({}) },
  { name: "options null", call: tryAcquire(null) },
  { name: "options 'x' (not an object)", call: tryAcquire("x") },
  { name: "options with an unknown key", call: tryAcquire({ bogus: 1 }) },
  {
    // Accepted is what this row checks (199 is refused below). Whether the try also holds depends on
    // the machine: a 200 ms lease can run out before a slow attempt's answer arrives (a miss).
    name: "expiry 200 (the minimum)",
    call: async (locker, key) => {
      const lease = await locker.tryAcquire(undefined, key, { expiry: 200 });
      await lease?.release();
      return "accepted";
    },
  },
  { name: "expiry 199", call: tryAcquire({ expiry: 199 }) },
  { name: "expiry 50, autoExtend false", call: tryAcquire({ expiry: 50, autoExtend: false }) },
  { name: "expiry 1000, autoExtend false", call: tryAcquire({ expiry: 1000, autoExtend: false }) },
  { name: "expiry 1.5", call: tryAcquire({ expiry: 1.5 }) },
  { name: "expiry -1", call: tryAcquire({ expiry: -1 }) },
  { name: "expiry '1000' (a string)", call: tryAcquire({ expiry: "1000" }) },
  { name: "expiry NaN", call: tryAcquire({ expiry: Number.NaN }) },
  { name: "expiry 2^31 (past a timer's range)", call: tryAcquire({ expiry: 2 ** 31 }) },
  { name: "autoExtend 'no'", call: tryAcquire({ autoExtend: "no" }) },
  { name: "autoExtend false without expiry", call: tryAcquire({ autoExtend: false }) },
  { name: "weight 1", call: tryAcquire({ weight: 1 }) },
  { name: "weight 2", call: tryAcquire({ weight: 2 }) },
  { name: "weight 0", call: tryAcquire({ weight: 0 }) },
  { name: "weight 1.5", call: tryAcquire({ weight: 1.5 }) },
  { name: "fencing true", call: tryAcquire({ fencing: true }) },
  { name: "fencing 'yes'", call: tryAcquire({ fencing: "yes" }) },
  // Keys.
  { name: "key ''", call: (locker) => locker.tryAcquire(undefined, "") },
  { name: "key 42 (not a string)", call: (locker) => locker.tryAcquire(undefined, 42 as never) },
  { name: "key of 10,000 characters", call: (locker, key) => locker.tryAcquire(undefined, key + "k".repeat(10_000)) },
  { name: "key with '}' and unicode", call: (locker, key) => locker.tryAcquire(undefined, `${key}}é✓`) },
  // Signals.
  { name: "signal aborted", call: tryAcquire(undefined, abortedSignal) },
  { name: "signal {} (not a signal)", call: tryAcquire(undefined, () => ({})) },
  { name: "signal null", call: tryAcquire(undefined, () => null) },
  { name: "lock with an aborted signal", call: (locker, key) => locker.lock(abortedSignal(), key) },
  { name: "tryLock key undefined", call: (locker) => locker.tryLock(undefined, undefined as never) },
  // Counts: a held lease counts once in heldCount, a waiter once in waitingCount.
  {
    name: "heldCount after two leases on two keys",
    call: async (locker, key) => {
      const counted = locker as Locker & { heldCount?: number };
      const a = await locker.tryAcquire(undefined, `${key}:a`);
      const b = await locker.tryAcquire(undefined, `${key}:b`);
      const held = counted.heldCount;
      await a?.release();
      await b?.release();
      return { heldCount: held, after: counted.heldCount };
    },
  },
  {
    name: "waitingCount with one waiter",
    call: async (locker, key) => {
      const counted = locker as Locker & { waitingCount?: number };
      const lease = await locker.tryAcquire(undefined, key, { weight: undefined });
      const controller = new AbortController();
      let settled = false;
      const waiting = locker.lock(controller.signal, key).then(
        (release) => {
          settled = true;
          return release();
        },
        () => undefined,
      );
      // Until the caller waits (its first attempt may take a while on a loaded machine) or got in.
      const until = performance.now() + 5000;
      while (!settled && counted.waitingCount === 0 && performance.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const count = counted.waitingCount;
      controller.abort(new Error("done"));
      await waiting;
      await lease?.release();
      return { waitingCount: count };
    },
  },
];

/** The lockers by what they belong to: a read-write locker's views (`<name>.read`, `<name>.write`) in one group. */
function groupsOfLockers(): Map<string, Array<[string, Locker]>> {
  const groups = new Map<string, Array<[string, Locker]>>();
  for (const [name, locker] of lockers) {
    const owner = name.replace(/\.(read|write)$/, "");
    groups.set(owner, [...(groups.get(owner) ?? []), [name, locker]]);
  }
  return groups;
}

/** What a call gave: the result's shape, or the error's class and code. */
async function outcomeOf(row: Row, locker: Locker, key: string): Promise<string> {
  try {
    const result = await row.call(locker, key);
    if (result === undefined) return "undefined";
    if (typeof result === "object" && result !== null && "release" in result) {
      await (result as { release(): Promise<void> }).release();
      return "Lease";
    }
    return JSON.stringify(result);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const name = error instanceof Error ? error.constructor.name : typeof error;
    return typeof code === "string" && code !== name ? `${name}(${code})` : name;
  }
}

/**
 * Rows that must differ from the reference, per locker, with the reason. Every other cell must
 * equal the reference's.
 */
const EXPECTED_DIFFERENCES: Record<string, Record<string, string>> = {};
for (const semaphore of [
  "MemorySemaphore(limit 3)",
  "FileSemaphore(limit 3)",
  "RedisSemaphore(limit 3)",
  "PostgresSemaphore(limit 3)",
  "PostgresTableSemaphore(limit 3)",
  "MySqlSemaphore(limit 3)",
  "SqliteSemaphore(limit 3)",
  "EtcdSemaphore(limit 3)",
  "ZooKeeperSemaphore(limit 3)",
]) {
  EXPECTED_DIFFERENCES[semaphore] = {
    "weight 2": "a semaphore's limit is 3: weight 2 fits (a lock's limit is 1)",
    "fencing true": "fencing needs an exclusive grant; a semaphore with limit 3 shares its permits",
    "waitingCount with one waiter": "a second permit is free: the second caller does not wait",
  };
}
for (const read of [
  "MemoryReadWriteLocker.read",
  "RedisReadWriteLocker.read",
  "FileReadWriteLocker.read",
  "PostgresReadWriteLocker.read",
  "PostgresTableReadWriteLocker.read",
  "SqliteReadWriteLocker.read",
  "EtcdReadWriteLocker.read",
  "ZooKeeperReadWriteLocker.read",
]) {
  EXPECTED_DIFFERENCES[read] = {
    "fencing true": "read leases are shared: fencing needs an exclusive grant",
    "waitingCount with one waiter": "readers share: the second reader does not wait",
  };
}
/** What an in-process locker may do differently: no store round trip, no default lease length. */
const IN_PROCESS: Record<string, string> = {
  "expiry 199": "no round trip to a store: a lease of any length from 1 ms is safe in one process",
  "expiry 50, autoExtend false": "no round trip to a store: a lease of any length from 1 ms is safe in one process",
  "autoExtend false without expiry": "an in-process lock has no default lease length (it is held by its process)",
};
for (const memory of [
  "MemoryLocker",
  "MemorySemaphore(limit 3)",
  "MemoryReadWriteLocker.read",
  "MemoryReadWriteLocker.write",
  "CombinedLocker(all)",
]) {
  EXPECTED_DIFFERENCES[memory] = { ...EXPECTED_DIFFERENCES[memory], ...IN_PROCESS };
}
EXPECTED_DIFFERENCES["CombinedLocker(all)"] = {
  "autoExtend false without expiry": "its MemoryLocker member has no default lease length",
};
EXPECTED_DIFFERENCES["RedisLocker(quorum of 3)"] = {
  "fencing true": "no single counter sees every grant across independent nodes",
};
EXPECTED_DIFFERENCES["CombinedLocker(majority)"] = {
  "fencing true": "with a majority no single member sees every grant",
};
EXPECTED_DIFFERENCES.MemcachedLocker = {
  "fencing true": "Memcached has no counter that survives a restart or an eviction",
};
for (const zookeeper of [
  "ZooKeeperLocker",
  "ZooKeeperSemaphore(limit 3)",
  "ZooKeeperReadWriteLocker.read",
  "ZooKeeperReadWriteLocker.write",
]) {
  EXPECTED_DIFFERENCES[zookeeper] = {
    ...EXPECTED_DIFFERENCES[zookeeper],
    "expiry 2^31 (past a timer's range)":
      "a lease may not outlast the ZooKeeper session (30 s here), which deletes its node when it ends",
  };
}

let redis: RedisServer[] = [];
const clients: Redis[] = [];
let postgres: PostgresFixture | undefined;
/** A PgBouncer in transaction mode in front of `postgres`: the table lockers' documented setup. */
let pooler: PgBouncerServer | undefined;
let mysql: MySqlFixture | undefined;
let etcd: EtcdFixture | undefined;
let zookeeper: ZooKeeperFixture | undefined;
let memcached: MemcachedFixture | undefined;
const lockers = new Map<string, Locker>();
const closables: Array<{ close(): Promise<void> }> = [];
/** The file lockers' lock directory (removed after the lockers close). */
let lockDirectory: string | undefined;
/** The SQLite lockers' database file (its directory removed after the lockers close). */
let sqlitePath: string | undefined;

/** PostgreSQL, and a transaction pooler in front of it once it runs. */
async function startPostgres(): Promise<[PostgresFixture, PgBouncerServer]> {
  const fixture = await PostgresFixture.start();
  try {
    return [fixture, await PgBouncerServer.start(fixture.server, { poolMode: "transaction", poolSize: 4 })];
  } catch (error) {
    await fixture.stop();
    throw error;
  }
}

beforeAll(async () => {
  const started = await Promise.allSettled([
    startServers(3),
    startPostgres(),
    MySqlFixture.start(),
    EtcdFixture.start(),
    ZooKeeperFixture.start(),
    MemcachedFixture.start(),
  ]);
  const [redisStarted, postgresStarted, mysqlStarted, etcdStarted, zookeeperStarted, memcachedStarted] = started;
  // Kept before any failure is thrown, so that afterAll stops what did start.
  if (redisStarted.status === "fulfilled") redis = redisStarted.value;
  if (postgresStarted.status === "fulfilled") [postgres, pooler] = postgresStarted.value;
  if (mysqlStarted.status === "fulfilled") mysql = mysqlStarted.value;
  if (etcdStarted.status === "fulfilled") etcd = etcdStarted.value;
  if (zookeeperStarted.status === "fulfilled") zookeeper = zookeeperStarted.value;
  if (memcachedStarted.status === "fulfilled") memcached = memcachedStarted.value;
  for (const outcome of started) if (outcome.status === "rejected") throw outcome.reason;
  const client = (index: number): Redis => {
    const created = (redis[index] as RedisServer).client();
    clients.push(created);
    return created;
  };
  const directory = tempLockDirectory("matrix");
  lockDirectory = directory;
  sqlitePath = join(tempLockDirectory("matrix-sqlite"), "locks.db");
  const add = (name: string, locker: Locker): void => {
    lockers.set(name, locker);
    closables.push(locker);
  };
  const addReadWrite = (name: string, readWrite: ReadWriteLocker): void => {
    closables.push(readWrite);
    lockers.set(`${name}.read`, readWrite.read);
    lockers.set(`${name}.write`, readWrite.write);
  };
  add("MemoryLocker", new MemoryLocker());
  add("MemorySemaphore(limit 3)", new MemorySemaphore({ limit: 3 }));
  addReadWrite("MemoryReadWriteLocker", new MemoryReadWriteLocker());
  add("FileLocker", new FileLocker({ directory }));
  add("FileSemaphore(limit 3)", new FileSemaphore({ directory, limit: 3 }));
  addReadWrite("FileReadWriteLocker", new FileReadWriteLocker({ directory }));
  add("RedisLocker(one node)", new RedisLocker(client(0)));
  add("RedisLocker(quorum of 3)", new RedisLocker([client(0), client(1), client(2)]));
  add("RedisSemaphore(limit 3)", new RedisSemaphore(client(0), { limit: 3 }));
  addReadWrite("RedisReadWriteLocker", new RedisReadWriteLocker(client(0)));
  const pg = postgres as PostgresFixture;
  add("PostgresLocker", pg.locker());
  add("PostgresSemaphore(limit 3)", new PostgresSemaphore(pg.pool(), { limit: 3 }));
  addReadWrite("PostgresReadWriteLocker", new PostgresReadWriteLocker(pg.pool()));
  const pooled = (pooler as PgBouncerServer).pool({ max: 4 });
  pg.pools.push(pooled);
  add("PostgresTableLocker(PgBouncer)", new PostgresTableLocker(pooled));
  add("PostgresTableSemaphore(limit 3)", new PostgresTableSemaphore(pooled, { limit: 3 }));
  addReadWrite("PostgresTableReadWriteLocker", new PostgresTableReadWriteLocker(pooled));
  const my = mysql as MySqlFixture;
  add("MySqlLocker", new MySqlLocker(my.pool()));
  add("MySqlSemaphore(limit 3)", new MySqlSemaphore(my.pool(), { limit: 3 }));
  add("MySqlTableLocker", new MySqlTableLocker(my.pool()));
  add("SqliteLocker", new SqliteLocker(sqlitePath));
  add("SqliteSemaphore(limit 3)", new SqliteSemaphore(sqlitePath, { limit: 3 }));
  addReadWrite("SqliteReadWriteLocker", new SqliteReadWriteLocker(sqlitePath));
  const etcdFixture = etcd as EtcdFixture;
  lockers.set("EtcdLocker", etcdFixture.locker({ expiry: 30_000 }));
  lockers.set("EtcdSemaphore(limit 3)", etcdFixture.semaphore(3, { expiry: 30_000 }));
  const etcdReadWrite = etcdFixture.readWrite({ expiry: 30_000 });
  lockers.set("EtcdReadWriteLocker.read", etcdReadWrite.read);
  lockers.set("EtcdReadWriteLocker.write", etcdReadWrite.write);
  // The ZooKeeper and Memcached fixtures close the lockers they made.
  const zk = zookeeper as ZooKeeperFixture;
  lockers.set("ZooKeeperLocker", zk.locker({ expiry: 30_000 }));
  lockers.set("ZooKeeperSemaphore(limit 3)", zk.semaphore(3, { expiry: 30_000 }));
  const zookeeperReadWrite = zk.readWrite({ expiry: 30_000 });
  lockers.set("ZooKeeperReadWriteLocker.read", zookeeperReadWrite.read);
  lockers.set("ZooKeeperReadWriteLocker.write", zookeeperReadWrite.write);
  lockers.set("MemcachedLocker", (memcached as MemcachedFixture).locker({ expiry: 30_000 }));
  add("CombinedLocker(all)", new CombinedLocker([new MemoryLocker(), new RedisLocker(client(1))]));
  add(
    "CombinedLocker(majority)",
    new CombinedLocker([new RedisLocker(client(0)), new RedisLocker(client(1)), new RedisLocker(client(2))], {
      strategy: "majority",
    }),
  );
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(closables.map((closable) => closable.close()));
  for (const created of clients) created.disconnect();
  await pooler?.stop();
  await Promise.allSettled([
    postgres?.stop(),
    mysql?.stop(),
    etcd?.stop(),
    zookeeper?.stop(),
    memcached?.stop(),
    stopServers(redis),
  ]);
  if (lockDirectory !== undefined) rmSync(lockDirectory, { recursive: true, force: true });
  if (sqlitePath !== undefined) rmSync(dirname(sqlitePath), { recursive: true, force: true });
});

describe("one outcome everywhere", () => {
  it("gives every locker the reference's outcome, except the listed differences", async () => {
    const reference = "RedisLocker(one node)";
    const table: Record<string, Record<string, string>> = {};
    const disagreements: string[] = [];
    for (const row of ROWS) {
      // Every locker at once, each on its own key (a row costs its slowest store's round trips);
      // the two views of a read-write locker one after the other, as they share its counts.
      const outcomes = new Map<string, string>();
      await Promise.all(
        [...groupsOfLockers().values()].map(async (group) => {
          for (const [name, locker] of group)
            outcomes.set(name, await outcomeOf(row, locker, uniqueKey(`matrix-${name}`)));
        }),
      );
      const line = Object.fromEntries([...lockers.keys()].map((name) => [name, outcomes.get(name) as string]));
      table[row.name] = line;
      const expected = line[reference];
      for (const [name, outcome] of Object.entries(line)) {
        const allowed = EXPECTED_DIFFERENCES[name]?.[row.name];
        if (allowed === undefined && outcome !== expected) {
          disagreements.push(`${row.name} on ${name}: ${outcome} (reference ${expected})`);
        }
        if (allowed !== undefined && outcome === expected) {
          disagreements.push(`${row.name} on ${name}: listed as differing (${allowed}) but gave ${outcome} too`);
        }
      }
    }
    // The matrix, for the log: one line per row, the cells that differ from the reference.
    for (const [rowName, line] of Object.entries(table)) {
      const expected = line[reference];
      const differing = Object.entries(line).filter(([, outcome]) => outcome !== expected);
      console.log(`${rowName}: ${expected}${differing.map(([name, outcome]) => ` | ${name}: ${outcome}`).join("")}`);
    }
    expect(disagreements).toEqual([]);
  }, 120_000);

  it("accepts the same constructor expiry on every locker that takes one: up to 2^31 - 1 ms, not past it", async () => {
    const directory = lockDirectory as string;
    const redisClient = clients[0] as Redis;
    const pg = postgres as PostgresFixture;
    const my = mysql as MySqlFixture;
    const etcdClient = (etcd as EtcdFixture).client();
    const zookeeperClient = (zookeeper as ZooKeeperFixture).client();
    const memcachedClient = (memcached as MemcachedFixture).client();
    const pooled = (pooler as PgBouncerServer).pool({ max: 1 });
    pg.pools.push(pooled);
    const sqlite = sqlitePath as string;
    const constructors: Record<string, (expiry: number) => { close(): Promise<void> }> = {
      RedisLocker: (expiry) => new RedisLocker(redisClient, { expiry }),
      RedisSemaphore: (expiry) => new RedisSemaphore(redisClient, { expiry, limit: 2 }),
      RedisReadWriteLocker: (expiry) => new RedisReadWriteLocker(redisClient, { expiry }),
      FileLocker: (expiry) => new FileLocker({ directory, expiry }),
      FileReadWriteLocker: (expiry) => new FileReadWriteLocker({ directory, expiry }),
      PostgresLocker: (expiry) => new PostgresLocker(pg.pool(), { expiry }),
      PostgresReadWriteLocker: (expiry) => new PostgresReadWriteLocker(pg.pool(), { expiry }),
      MySqlLocker: (expiry) => new MySqlLocker(my.pool(), { expiry }),
      EtcdLocker: (expiry) => new EtcdLocker(etcdClient, { expiry }),
      EtcdSemaphore: (expiry) => new EtcdSemaphore(etcdClient, { expiry, limit: 2 }),
      EtcdReadWriteLocker: (expiry) => new EtcdReadWriteLocker(etcdClient, { expiry }),
      FileSemaphore: (expiry) => new FileSemaphore({ directory, expiry, limit: 2 }),
      PostgresSemaphore: (expiry) => new PostgresSemaphore(pg.pool(), { expiry, limit: 2 }),
      MySqlSemaphore: (expiry) => new MySqlSemaphore(my.pool(), { expiry, limit: 2 }),
      PostgresTableLocker: (expiry) => new PostgresTableLocker(pooled, { expiry }),
      PostgresTableSemaphore: (expiry) => new PostgresTableSemaphore(pooled, { expiry, limit: 2 }),
      PostgresTableReadWriteLocker: (expiry) => new PostgresTableReadWriteLocker(pooled, { expiry }),
      MySqlTableLocker: (expiry) => new MySqlTableLocker(my.pool(), { expiry }),
      MySqlTableSemaphore: (expiry) => new MySqlTableSemaphore(my.pool(), { expiry, limit: 2 }),
      MySqlTableReadWriteLocker: (expiry) => new MySqlTableReadWriteLocker(my.pool(), { expiry }),
      SqliteLocker: (expiry) => new SqliteLocker(sqlite, { expiry }),
      SqliteSemaphore: (expiry) => new SqliteSemaphore(sqlite, { expiry, limit: 2 }),
      SqliteReadWriteLocker: (expiry) => new SqliteReadWriteLocker(sqlite, { expiry }),
      ZooKeeperLocker: (expiry) => new ZooKeeperLocker(zookeeperClient, { expiry }),
      ZooKeeperSemaphore: (expiry) => new ZooKeeperSemaphore(zookeeperClient, { expiry, limit: 2 }),
      ZooKeeperReadWriteLocker: (expiry) => new ZooKeeperReadWriteLocker(zookeeperClient, { expiry }),
      MemcachedLocker: (expiry) => new MemcachedLocker(memcachedClient, { expiry }),
    };
    const outcomes: Record<string, string> = {};
    for (const [name, make] of Object.entries(constructors)) {
      for (const expiry of [2 ** 31 - 1, 2 ** 31]) {
        try {
          await make(expiry).close();
          outcomes[`${name} ${expiry}`] = "accepted";
        } catch (error) {
          outcomes[`${name} ${expiry}`] = (error as Error).constructor.name;
        }
      }
    }
    const expected = Object.fromEntries(
      Object.keys(constructors).flatMap((name) => [
        [`${name} ${2 ** 31 - 1}`, "accepted"],
        [`${name} ${2 ** 31}`, "InvalidArgumentError"],
      ]),
    );
    expect(outcomes).toEqual(expected);
  });
});
