/**
 * iovalkey (the Valkey project's fork of ioredis) clients: the lock contract on RedisLocker with
 * iovalkey clients, and a round on RedisSemaphore and RedisReadWriteLocker, against a real
 * redis-server on a free loopback port (no Valkey server is packaged here; Valkey speaks the same
 * protocol and scripts). The lockers tell an iovalkey client by the shape they tell ioredis by.
 */
import { Valkey } from "iovalkey";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Locker, RedisLocker, RedisReadWriteLocker, RedisSemaphore } from "../../src/index.js";
import { type LockerHarness, lockerContract } from "../contracts/contract.js";
import { HOST, type RedisServer, startServers, stopServers } from "../helpers/redis.js";

/** Lockers on one server, each on its own iovalkey client (like separate processes). */
async function valkeyHarness(): Promise<LockerHarness> {
  const [server] = await startServers(1);
  const clients: Valkey[] = [];
  const lockers: Locker[] = [];
  const locker = (options?: { wakeOnly?: boolean }): Locker => {
    const client = new Valkey({ host: HOST, port: (server as RedisServer).port });
    clients.push(client);
    const made = new RedisLocker(client, options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {});
    lockers.push(made);
    return made;
  };
  return {
    create: async (options) => locker(options),
    peer: async (_locker, options) => locker(options),
    fencing: true,
    handOff: true,
    cleanup: async () => {
      await Promise.allSettled(lockers.map((made) => made.close()));
      for (const client of clients) client.disconnect();
      await stopServers([server as RedisServer]);
    },
  };
}

lockerContract("RedisLocker, iovalkey client, one node", valkeyHarness);

describe("iovalkey clients in the other Redis lockers", () => {
  let servers: RedisServer[] = [];
  let client: Valkey;
  beforeAll(async () => {
    servers = await startServers(1);
    client = new Valkey({ host: HOST, port: (servers[0] as RedisServer).port });
  });
  afterAll(async () => {
    client?.disconnect();
    await stopServers(servers);
  });

  it("RedisSemaphore and RedisReadWriteLocker count and exclude on an iovalkey client", async () => {
    const semaphore = new RedisSemaphore(client, { limit: 2 });
    const readWrite = new RedisReadWriteLocker(client);
    try {
      const [a, b] = [await semaphore.acquire(undefined, "s"), await semaphore.acquire(undefined, "s")];
      expect(await semaphore.tryAcquire(undefined, "s")).toBeUndefined();
      await Promise.all([a.release(), b.release()]);
      const reader = await readWrite.read.acquire(undefined, "rw");
      const second = await readWrite.read.tryAcquire(undefined, "rw");
      expect(second).toBeDefined();
      expect(await readWrite.write.tryAcquire(undefined, "rw")).toBeUndefined();
      await Promise.all([reader.release(), second?.release()]);
    } finally {
      await semaphore.close();
      await readWrite.close();
    }
  });
});
