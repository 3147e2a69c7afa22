/**
 * CombinedLocker: the lock contract over [MemoryLocker, RedisLocker] (strategy "all") and over
 * three RedisLockers on independent nodes with one node down (strategy "majority"), plus the
 * combined locker's own semantics.
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CombinedLocker,
  InvalidArgumentError,
  type Locker,
  LockLostError,
  MemoryLocker,
  RedisLocker,
  type RedisLockerOptions,
  StoreUnavailableError,
  UnsupportedError,
} from "../../src/index.js";
import { type LockerHarness, lockerContract, uniqueKey, whenAborted } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";

const WAKE_ONLY: RedisLockerOptions = { backoff: { min: 20_000, max: 20_000 } };

/** Combined lockers over `servers`: each gets its own RedisLocker per live node (new connections). */
class CombinedFixture {
  readonly clients: Redis[] = [];
  readonly lockers: Locker[] = [];
  /** The memory member of each combined locker (peers share it: it is one process's store). */
  readonly memoryOf = new Map<Locker, MemoryLocker>();

  constructor(
    readonly servers: RedisServer[],
    readonly withMemory: boolean,
  ) {}

  redisLocker(server: RedisServer, options: RedisLockerOptions): RedisLocker {
    // A node that is down fails every command at once instead of queueing it while reconnecting.
    const client = server.running ? server.client() : server.client({ enableOfflineQueue: false });
    this.clients.push(client);
    const locker = new RedisLocker(client, options);
    this.lockers.push(locker);
    return locker;
  }

  combined(memory: MemoryLocker | undefined, wakeOnly: boolean | undefined): CombinedLocker {
    const options = wakeOnly ? WAKE_ONLY : {};
    const redis = this.servers.map((server) => this.redisLocker(server, options));
    const members = memory === undefined ? redis : [memory, ...redis];
    const combined = new CombinedLocker(members, { strategy: this.withMemory ? "all" : "majority" });
    this.lockers.push(combined);
    if (memory !== undefined) this.memoryOf.set(combined, memory);
    return combined;
  }

  harness(): LockerHarness {
    return {
      create: async (options) => this.combined(this.withMemory ? new MemoryLocker() : undefined, options?.wakeOnly),
      peer: async (locker, options) => this.combined(this.memoryOf.get(locker), options?.wakeOnly),
      fencing: this.withMemory,
      cleanup: () => this.stop(),
    };
  }

  async stop(): Promise<void> {
    await Promise.allSettled(this.lockers.map((locker) => locker.close()));
    for (const client of this.clients) client.disconnect();
    await stopServers(this.servers);
  }
}

const memoryAndRedis = async (): Promise<LockerHarness> => new CombinedFixture(await startServers(1), true).harness();

/** Three independent nodes, the middle one down for good. */
const majorityOneDown = async (): Promise<LockerHarness> => {
  const servers = await startServers(3);
  await servers[1]?.kill();
  return new CombinedFixture(servers, false).harness();
};

lockerContract("CombinedLocker all: [MemoryLocker, RedisLocker]", memoryAndRedis);
lockerContract("CombinedLocker majority: three RedisLockers, one node down", majorityOneDown);
lockAllSuite("CombinedLocker all: [MemoryLocker, RedisLocker]", memoryAndRedis);

describe("CombinedLocker semantics", () => {
  let servers: RedisServer[];
  let fixture: CombinedFixture;

  beforeAll(async () => {
    servers = await startServers(3);
    fixture = new CombinedFixture(servers, false);
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  it("refuses bad construction arguments and fencing with majority", async () => {
    expect(() => new CombinedLocker([])).toThrow(InvalidArgumentError);
    const memory = new MemoryLocker();
    expect(() => new CombinedLocker([memory, memory])).toThrow(/distinct/);
    expect(() => new CombinedLocker([memory], { strategy: "most" as never })).toThrow(/options\.strategy/);
    const majority = new CombinedLocker([memory, new MemoryLocker(), new MemoryLocker()], { strategy: "majority" });
    await expect(majority.acquire(undefined, uniqueKey(), { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
  });

  it("majority: the lease is lost once fewer than a majority hold it (it holds exactly a majority)", async () => {
    const combined = new CombinedLocker(
      servers.map((server) => fixture.redisLocker(server, { expiry: 1000 })),
      { strategy: "majority" },
    );
    const key = uniqueKey("majority-loss");
    const lease = await combined.acquire(undefined, key);
    const admins = servers.map((server) => server.client());
    fixture.clients.push(...admins);
    expect(await Promise.all(admins.map((admin) => admin.exists(`globallock:${key}`)))).toEqual([1, 1, 0]);
    await admins[0]?.del(`globallock:${key}`);
    const reason = await whenAborted(lease.lost);
    expect(reason).toBeInstanceOf(LockLostError);
    expect(() => lease.assertHeld()).toThrow(LockLostError);
    expect(await lease.releaseWithOutcome()).not.toBe("released");
    const next = await combined.acquire(AbortSignal.timeout(5000), key);
    await next.release();
  });

  it("all: an aborted wait releases what it took on the members", async () => {
    const memory = new MemoryLocker();
    const redis = fixture.redisLocker(servers[0] as RedisServer, {});
    const combined = new CombinedLocker([memory, redis]);
    const key = uniqueKey("all-abort");
    const blocker = await redis.acquire(undefined, key);
    const signal = AbortSignal.timeout(100);
    const error = await combined.acquire(signal, key).catch((e: unknown) => e);
    expect(error).toBe(signal.reason);
    expect(await memory.tryAcquire(undefined, key)).toBeDefined(); // the memory member was given back
    await blocker.release();
  });

  it("majority with two of three nodes down is a StoreUnavailableError carrying every member's error", async () => {
    const [a, b, c] = await startServers(3);
    try {
      const combined = new CombinedLocker(
        [a, b, c].map((server) => fixture.redisLocker(server as RedisServer, { expiry: 1000 })),
        { strategy: "majority" },
      );
      await b?.kill();
      await c?.kill();
      const error = await combined.acquire(undefined, uniqueKey("two-down")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).cause).toBeInstanceOf(AggregateError);
      expect(((error as Error).cause as AggregateError).errors).toHaveLength(2);
      const tried = await combined.tryAcquire(undefined, uniqueKey("two-down")).catch((e: unknown) => e);
      expect(tried).toBeInstanceOf(StoreUnavailableError);
    } finally {
      await stopServers([a, b, c]);
    }
  });
});
