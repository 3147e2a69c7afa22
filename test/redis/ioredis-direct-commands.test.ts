/**
 * The ioredis adapter lays out its commands' arguments itself (src/redis/client/ioredis-connection.ts):
 * on a plain standalone client it builds each command with ioredis's own `Command` class and sends
 * it with `sendCommand`, instead of calling `client.evalsha(…)`, `client.set(…)`, … (which pass
 * every argument through `Array.prototype.flat`). On a client with auto-pipelining or
 * `showFriendlyErrorStack` it calls ioredis's methods, which honour those options (a client with a
 * `keyPrefix` is refused by the lockers). Real server;
 * the client's methods are wrapped (on the instance) only to see which path each command took.
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisLocker, RedisSemaphore } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";

let server: RedisServer;
const clients: Redis[] = [];
const closers: Array<{ close(): Promise<void> }> = [];
beforeAll(async () => {
  [server] = (await startServers(1)) as [RedisServer];
});
afterAll(async () => {
  await Promise.allSettled(closers.map((closer) => closer.close()));
  for (const client of clients) client.disconnect();
  if (server !== undefined) await stopServers([server]);
});

/** The methods whose calls mean "sent through ioredis's methods". */
const METHODS = ["evalsha", "eval", "set", "zrem"] as const;

/** A client of the test server with `options`, counting the calls of its command methods and of sendCommand. */
function countedClient(options: Record<string, unknown> = {}): { client: Redis; methods: string[]; sent: string[] } {
  const client = server.client(options);
  clients.push(client);
  const methods: string[] = [];
  const sent: string[] = [];
  const target = client as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of METHODS) {
    const method = target[name]?.bind(client);
    target[name] = (...args: unknown[]) => {
      methods.push(name);
      return method?.(...args);
    };
  }
  const sendCommand = target.sendCommand?.bind(client);
  target.sendCommand = (...args: unknown[]) => {
    sent.push(String((args[0] as { name: string }).name));
    return sendCommand?.(...args);
  };
  return { client, methods, sent };
}

/** Locks, waits for a second locker to be handed the key, and releases on `locker` and a peer. */
async function exercise(locker: RedisLocker, peer: RedisLocker, key: string): Promise<void> {
  const release = await locker.lock(undefined, key);
  const waiting = peer.lock(undefined, key);
  await release();
  const releasePeer = await waiting;
  await releasePeer();
  // Held until released: the lock's key is gone after its release.
  const [ok, again] = await locker.tryLock(undefined, key);
  expect(ok).toBe(true);
  await again();
}

describe("commands built by the ioredis adapter", () => {
  it("a plain client: every command goes through sendCommand, none through ioredis's methods, and locks work", async () => {
    const { client, methods, sent } = countedClient();
    const locker = new RedisLocker(client, { expiry: 2000 });
    const peer = new RedisLocker(countedClient().client, { expiry: 2000 });
    closers.push(locker, peer);
    await exercise(locker, peer, uniqueKey("direct"));
    expect(methods).toEqual([]);
    expect(sent).toEqual(expect.arrayContaining(["set", "evalsha"]));
  });

  it("a plain client: semaphore permits (EVALSHA, ZREM) and a script the node forgot (EVAL after NOSCRIPT)", async () => {
    const { client, methods, sent } = countedClient();
    const semaphore = new RedisSemaphore(client, { limit: 2, expiry: 2000 });
    closers.push(semaphore);
    const key = uniqueKey("direct-permits");
    const first = await semaphore.acquire(undefined, key);
    const second = await semaphore.acquire(undefined, key);
    expect(await semaphore.tryAcquire(undefined, key)).toBeUndefined();
    expect(await first.releaseWithOutcome()).toBe("released");
    await server.client().script("FLUSH");
    const third = await semaphore.acquire(undefined, key);
    expect(await second.releaseWithOutcome()).toBe("released");
    expect(await third.releaseWithOutcome()).toBe("released");
    expect(methods).toEqual([]);
    expect(sent).toEqual(expect.arrayContaining(["evalsha", "eval", "zrem"]));
  });

  for (const [option, value] of [
    ["enableAutoPipelining", true],
    ["showFriendlyErrorStack", true],
  ] as const) {
    it(`a client with ${option}: ioredis's methods`, async () => {
      const { client, methods } = countedClient({ [option]: value });
      const locker = new RedisLocker(client, { expiry: 2000 });
      const peer = new RedisLocker(countedClient({ [option]: value }).client, { expiry: 2000 });
      closers.push(locker, peer);
      await exercise(locker, peer, uniqueKey(option));
      expect(methods).toEqual(expect.arrayContaining(["set", "evalsha"]));
    });
  }
});
