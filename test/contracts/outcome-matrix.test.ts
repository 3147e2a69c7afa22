/**
 * One outcome everywhere (issue #18): the same arguments give the same result class and error
 * code on every locker. One matrix of acquire options, keys, signals and counts runs over every
 * implementation (servers started here) and is printed; a row may differ from the in-process
 * reference only where {@link EXPECTED_DIFFERENCES} says so, with the reason.
 */
import { rmSync } from "node:fs";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CombinedLocker,
  EtcdLocker,
  EtcdReadWriteLocker,
  EtcdSemaphore,
  FileLocker,
  FileReadWriteLocker,
  type Locker,
  MemoryLocker,
  MemoryReadWriteLocker,
  MemorySemaphore,
  MySqlLocker,
  PostgresLocker,
  PostgresReadWriteLocker,
  RedisLocker,
  RedisReadWriteLocker,
  RedisSemaphore,
} from "../../src/index.js";
import { EtcdFixture } from "../helpers/etcd-harness.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
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
  { name: "expiry 200 (the minimum)", call: tryAcquire({ expiry: 200 }) },
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
for (const semaphore of ["MemorySemaphore(limit 3)", "RedisSemaphore(limit 3)", "EtcdSemaphore(limit 3)"]) {
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
  "EtcdReadWriteLocker.read",
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

let redis: RedisServer[] = [];
const clients: Redis[] = [];
let postgres: PostgresFixture | undefined;
let mysql: MySqlFixture | undefined;
let etcd: EtcdFixture | undefined;
const lockers = new Map<string, Locker>();
const closables: Array<{ close(): Promise<void> }> = [];
/** The file lockers' lock directory (removed after the lockers close). */
let lockDirectory: string | undefined;

beforeAll(async () => {
  [redis, postgres, mysql, etcd] = await Promise.all([
    startServers(3),
    PostgresFixture.start(),
    MySqlFixture.start(),
    EtcdFixture.start(),
  ]);
  const client = (index: number): Redis => {
    const created = (redis[index] as RedisServer).client();
    clients.push(created);
    return created;
  };
  const directory = tempLockDirectory("matrix");
  lockDirectory = directory;
  const add = (name: string, locker: Locker): void => {
    lockers.set(name, locker);
    closables.push(locker);
  };
  add("MemoryLocker", new MemoryLocker());
  add("MemorySemaphore(limit 3)", new MemorySemaphore({ limit: 3 }));
  const memoryReadWrite = new MemoryReadWriteLocker();
  closables.push(memoryReadWrite);
  lockers.set("MemoryReadWriteLocker.read", memoryReadWrite.read);
  lockers.set("MemoryReadWriteLocker.write", memoryReadWrite.write);
  add("FileLocker", new FileLocker({ directory }));
  const fileReadWrite = new FileReadWriteLocker({ directory });
  closables.push(fileReadWrite);
  lockers.set("FileReadWriteLocker.read", fileReadWrite.read);
  lockers.set("FileReadWriteLocker.write", fileReadWrite.write);
  add("RedisLocker(one node)", new RedisLocker(client(0)));
  add("RedisLocker(quorum of 3)", new RedisLocker([client(0), client(1), client(2)]));
  add("RedisSemaphore(limit 3)", new RedisSemaphore(client(0), { limit: 3 }));
  const redisReadWrite = new RedisReadWriteLocker(client(0));
  closables.push(redisReadWrite);
  lockers.set("RedisReadWriteLocker.read", redisReadWrite.read);
  lockers.set("RedisReadWriteLocker.write", redisReadWrite.write);
  add("PostgresLocker", (postgres as PostgresFixture).locker());
  const postgresReadWrite = new PostgresReadWriteLocker((postgres as PostgresFixture).pool());
  closables.push(postgresReadWrite);
  lockers.set("PostgresReadWriteLocker.read", postgresReadWrite.read);
  lockers.set("PostgresReadWriteLocker.write", postgresReadWrite.write);
  add("MySqlLocker", new MySqlLocker((mysql as MySqlFixture).pool()));
  const etcdFixture = etcd as EtcdFixture;
  lockers.set("EtcdLocker", etcdFixture.locker({ expiry: 30_000 }));
  lockers.set("EtcdSemaphore(limit 3)", etcdFixture.semaphore(3, { expiry: 30_000 }));
  const etcdReadWrite = etcdFixture.readWrite({ expiry: 30_000 });
  lockers.set("EtcdReadWriteLocker.read", etcdReadWrite.read);
  lockers.set("EtcdReadWriteLocker.write", etcdReadWrite.write);
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
  await postgres?.stop();
  await mysql?.stop();
  await etcd?.stop();
  await stopServers(redis);
  if (lockDirectory !== undefined) rmSync(lockDirectory, { recursive: true, force: true });
});

describe("one outcome everywhere", () => {
  it("gives every locker the reference's outcome, except the listed differences", async () => {
    const reference = "RedisLocker(one node)";
    const table: Record<string, Record<string, string>> = {};
    const disagreements: string[] = [];
    for (const row of ROWS) {
      const line: Record<string, string> = {};
      for (const [name, locker] of lockers) line[name] = await outcomeOf(row, locker, uniqueKey(`matrix-${name}`));
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
