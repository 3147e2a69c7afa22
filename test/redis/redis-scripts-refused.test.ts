/**
 * A Redis that refuses scripts (issue 44): an ACL user without @scripting, and a server whose
 * config renames EVALSHA away. Every scripted locker rejects its first attempt with an
 * UnsupportedError naming the refused command and the ways out, and takes nothing (the lean SET NX
 * never goes out alone). Servers are started here, never the shared one.
 */
import type { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Locker,
  RedisLocker,
  RedisReadWriteLocker,
  RedisSemaphore,
  StoreUnavailableError,
  UnsupportedError,
} from "../../src/index.js";
import type { RedisClient } from "../../src/redis/types.js";
import { TcpProxy } from "../../support/tcp-proxy.mjs";
import { uniqueKey } from "../contracts/contract.js";
import { destroyQuietly, type TestNodeRedis } from "../helpers/node-redis.js";
import { RedisServer, stopServers } from "../helpers/redis.js";

/** The ACL user of the issue: everything but scripting. */
const APP_USER = ["app", "on", ">pw", "~*", "&*", "+@all", "-@scripting"];

let aclServer: RedisServer; // user "app" refuses scripts; the default user runs them
let renamed: RedisServer; // rename-command EVALSHA ""
let plain: RedisServer;
const clients: Redis[] = [];
const nodeClients: TestNodeRedis[] = [];
const lockers: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  [aclServer, renamed, plain] = await Promise.all([
    RedisServer.start(),
    RedisServer.start({ config: 'rename-command EVALSHA ""\n' }),
    RedisServer.start(),
  ]);
  await admin(aclServer).call("ACL", "SETUSER", ...APP_USER);
});
afterAll(async () => {
  await Promise.allSettled(lockers.map((locker) => locker.close()));
  for (const client of clients) client.disconnect();
  for (const client of nodeClients) destroyQuietly(client);
  await stopServers([aclServer, renamed, plain]);
});

/** A new client of `server` as its default user. */
function admin(server: RedisServer): Redis {
  const client = server.client();
  clients.push(client);
  return client;
}

/** A new client of the ACL server as the user that may not run scripts. */
function app(): Redis {
  const client = aclServer.client({ username: "app", password: "pw" });
  clients.push(client);
  return client;
}

function keep<T extends { close(): Promise<void> }>(locker: T): T {
  lockers.push(locker);
  return locker;
}

/** Every key of `server` (the test servers hold only what these tests wrote). */
async function keysOf(server: RedisServer): Promise<string[]> {
  return (await admin(server).keys("*")).sort();
}

/** The rejection of `promise` (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => new Error("expected a rejection"),
    (error: unknown) => error,
  );
}

/** Asserts `error` is the refusal naming `command`, with the server's error as its cause. */
function expectRefusal(error: unknown, command: RegExp): void {
  expect(error).toBeInstanceOf(UnsupportedError);
  const refusal = error as UnsupportedError;
  expect(refusal.code).toBe("ERR_GLOBALLOCK_UNSUPPORTED");
  expect(refusal.message).toMatch(command);
  expect(refusal.message).toMatch(/@scripting/);
  expect(refusal.message).toMatch(/rename-command/);
  expect(refusal.message).toMatch(/scripts: false/);
  expect(refusal.cause).toBeInstanceOf(Error);
  expect((refusal.cause as Error).message).toMatch(/^(NOPERM|ERR unknown command)/);
}

/** Every way a locker's first call can take a key, each of which must be refused. */
async function expectEveryCallRefused(locker: Locker, command: RegExp): Promise<void> {
  const key = uniqueKey("refused");
  expectRefusal(await rejection(locker.lock(undefined, key)), command);
  expectRefusal(await rejection(locker.tryLock(undefined, key)), command);
  expectRefusal(await rejection(locker.tryAcquire(undefined, key)), command);
  expectRefusal(await rejection(locker.acquire(AbortSignal.timeout(5000), key, { autoExtend: false })), command);
  expectRefusal(await rejection(locker.inspect(undefined, key)), command);
}

describe("an ACL user without @scripting", () => {
  it("RedisLocker refuses the first attempt (and every later one), naming EVALSHA and EVAL, and leaves no key", async () => {
    const before = await keysOf(aclServer);
    const locker = keep(new RedisLocker(app()));
    await expectEveryCallRefused(locker, /Redis refused EVALSHA and EVAL \(NOPERM/);
    expect(await keysOf(aclServer)).toEqual(before);
    expect(locker.heldCount).toBe(0);
  });

  it("a fenced attempt is refused the same way", async () => {
    const locker = keep(new RedisLocker(app()));
    const error = await rejection(locker.acquire(undefined, uniqueKey(), { fencing: true }));
    expectRefusal(error, /EVALSHA and EVAL/);
  });

  it("RedisSemaphore and RedisReadWriteLocker (both views) refuse the same way and take nothing", async () => {
    const before = await keysOf(aclServer);
    const semaphore = keep(new RedisSemaphore(app(), { limit: 3 }));
    await expectEveryCallRefused(semaphore, /EVALSHA and EVAL/);
    const readWrite = keep(new RedisReadWriteLocker(app()));
    await expectEveryCallRefused(readWrite.read, /EVALSHA and EVAL/);
    await expectEveryCallRefused(readWrite.write, /EVALSHA and EVAL/);
    expect(await keysOf(aclServer)).toEqual(before);
  });

  it("a node-redis client is refused the same way", async () => {
    const client = createClient({ url: `redis://app:pw@${aclServer.host}:${aclServer.port}` });
    client.on("error", () => undefined);
    await client.connect();
    nodeClients.push(client as unknown as TestNodeRedis);
    const before = await keysOf(aclServer);
    const locker = keep(new RedisLocker(client as unknown as RedisClient));
    await expectEveryCallRefused(locker, /EVALSHA and EVAL \(NOPERM/);
    const semaphore = keep(new RedisSemaphore(client as unknown as RedisClient, { limit: 2 }));
    expectRefusal(await rejection(semaphore.tryLock(undefined, uniqueKey())), /EVALSHA and EVAL/);
    expect(await keysOf(aclServer)).toEqual(before);
  });

  it("the refusal is not remembered: once the user may run scripts, the same locker locks", async () => {
    await admin(aclServer).call("ACL", "SETUSER", "late", "on", ">pw", "~*", "&*", "+@all", "-@scripting");
    const client = aclServer.client({ username: "late", password: "pw" });
    clients.push(client);
    const locker = keep(new RedisLocker(client));
    const key = uniqueKey();
    expectRefusal(await rejection(locker.lock(undefined, key)), /EVALSHA and EVAL/);
    await admin(aclServer).call("ACL", "SETUSER", "late", "+@scripting");
    const lease = await locker.acquire(undefined, key);
    expect(await admin(aclServer).exists(`globallock:${key}`)).toBe(1);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("a user whose scripting is revoked after its first lock is refused at its next attempt, with nothing taken", async () => {
    await admin(aclServer).call("ACL", "SETUSER", "revoked", "on", ">pw", "~*", "&*", "+@all");
    const client = aclServer.client({ username: "revoked", password: "pw" });
    clients.push(client);
    const locker = keep(new RedisLocker(client));
    const first = await locker.acquire(undefined, uniqueKey());
    expect(await first.releaseWithOutcome()).toBe("released");
    await admin(aclServer).call("ACL", "SETUSER", "revoked", "-@scripting");
    // The first script call that meets the refusal reports it; the next attempt checks again before
    // its SET NX, so no key is left behind for a lease.
    const key = uniqueKey();
    const inspected = await rejection(locker.inspect(undefined, key));
    expectRefusal(inspected, /Redis refused EVALSHA \(NOPERM/);
    expectRefusal(await rejection(locker.tryLock(undefined, key)), /EVALSHA and EVAL/);
    expect(await admin(aclServer).exists(`globallock:${key}`)).toBe(0);
  });
});

describe('rename-command EVALSHA ""', () => {
  it("RedisLocker, RedisSemaphore and RedisReadWriteLocker refuse, naming EVALSHA alone, and leave no key", async () => {
    const before = await keysOf(renamed);
    await expectEveryCallRefused(keep(new RedisLocker(admin(renamed))), /Redis refused EVALSHA \(ERR unknown command/);
    await expectEveryCallRefused(keep(new RedisSemaphore(admin(renamed), { limit: 2 })), /refused EVALSHA \(/);
    await expectEveryCallRefused(keep(new RedisReadWriteLocker(admin(renamed))).write, /refused EVALSHA \(/);
    expect(await keysOf(renamed)).toEqual(before);
  });

  it("a Redlock quorum refuses when any one node refuses scripts, and takes the key on none", async () => {
    const key = uniqueKey();
    const before = await Promise.all([aclServer, renamed, plain].map(keysOf));
    // The ACL server as its default user runs scripts: only the renamed node refuses.
    const quorum = keep(new RedisLocker([admin(aclServer), admin(renamed), admin(plain)]));
    expectRefusal(await rejection(quorum.lock(undefined, key)), /Redis refused EVALSHA \(ERR unknown command/);
    expectRefusal(await rejection(quorum.tryLock(undefined, key)), /refused EVALSHA/);
    // Every node refusing: the same refusal.
    const allRefuse = keep(new RedisLocker([app(), admin(renamed), app()]));
    expectRefusal(await rejection(allRefuse.tryLock(undefined, key)), /Redis refused EVALSHA/);
    expect(await Promise.all([aclServer, renamed, plain].map(keysOf))).toEqual(before);
  });
});

describe("the check itself", () => {
  it("a node that cannot be reached at the first attempt is a StoreUnavailableError, not a refusal, and is checked again", async () => {
    const proxy = await TcpProxy.start(plain.port);
    try {
      const client = plain.client({ port: proxy.port });
      clients.push(client);
      await client.ping();
      const locker = keep(new RedisLocker(client, { operationTimeout: 300 }));
      proxy.blackhole(true, { drop: true });
      const error = await rejection(locker.tryLock(undefined, uniqueKey()));
      expect(error).toBeInstanceOf(StoreUnavailableError);
      proxy.cutAll();
      proxy.blackhole(false);
      await client.ping();
      const [ok, release] = await locker.tryLock(undefined, uniqueKey());
      expect(ok).toBe(true);
      await release();
    } finally {
      await proxy.close();
    }
  });

  it("costs one round trip once per locker: later attempts send no check", async () => {
    const client = admin(plain);
    const monitor = await admin(plain).monitor();
    const seen: string[] = [];
    monitor.on("monitor", (_time: string, args: string[]) => {
      seen.push(args.join(" ").toLowerCase());
    });
    try {
      const locker = keep(new RedisLocker(client));
      for (let i = 0; i < 3; i++) await (await locker.lock(undefined, uniqueKey()))();
      const probe = `probe-${uniqueKey()}`;
      await client.ping(probe); // every command before it has reached the monitor
      await expect.poll(() => seen.some((line) => line.includes(probe))).toBe(true);
      const checks = seen.filter((line) => line.endsWith("return 1 0") || line === "script load return 1");
      expect(checks).toHaveLength(2); // EVAL and SCRIPT LOAD of the check, once (the EVALSHA shows its SHA)
    } finally {
      monitor.disconnect();
    }
  });
});
