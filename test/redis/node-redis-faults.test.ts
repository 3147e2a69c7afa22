/**
 * RedisLocker on node-redis clients (the `redis` package, v6 and v5) against real redis-server
 * processes: construction errors, who owns the connections, a flushed script cache, a restart, a
 * frozen server (SIGSTOP), lost subscriber connections, and quorums mixing ioredis and node-redis.
 */
import { Redis } from "ioredis";
import { createClient, createCluster, createSentinel } from "redis";
import { createClient as createClient5, createCluster as createCluster5 } from "redis5";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  fencedWrite,
  InvalidArgumentError,
  type LockLostError,
  type RedisClient,
  RedisLocker,
  type RedisLockerOptions,
  StoreUnavailableError,
} from "../../src/index.js";
import { connectionOf } from "../../src/redis/client/connection-of.js";
import { ACQUIRE, LEAVE_QUEUE, REDLOCK_RELEASE_SCRIPT, RELEASE } from "../../src/redis/scripts.js";
import { TcpProxy } from "../../support/tcp-proxy.mjs";
import { uniqueKey } from "../contracts/contract.js";
import {
  destroyQuietly,
  dropSubscribersDuring,
  type NodeRedisVersion,
  nodeRedisClient,
  type TestNodeRedis,
} from "../helpers/node-redis.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually, sleep } from "../helpers/wait.js";

let server: RedisServer;
let admin: Redis;
beforeAll(async () => {
  [server] = (await startServers(1)) as [RedisServer];
  admin = server.client();
});
afterAll(async () => {
  admin?.disconnect();
  await stopServers(server === undefined ? [] : [server]);
});

/** What a test made: closed after it (lockers first, then clients, then servers). */
const made = {
  lockers: [] as RedisLocker[],
  clients: [] as Array<{ destroy(): unknown }>,
  servers: [] as RedisServer[],
};
afterEach(async () => {
  await Promise.allSettled(made.lockers.splice(0).map((locker) => locker.close()));
  for (const client of made.clients.splice(0)) destroyQuietly(client);
  await stopServers(made.servers.splice(0));
});

/** A connected node-redis client for `on` (default: the shared server), closed after the test. */
async function client(version: NodeRedisVersion = 6, on: RedisServer = server): Promise<TestNodeRedis> {
  const connected = await nodeRedisClient(on, version);
  made.clients.push(connected);
  return connected;
}

/** A RedisLocker on a new node-redis client (or one per server for a quorum), closed after the test. */
async function locker(
  options: RedisLockerOptions = {},
  version: NodeRedisVersion = 6,
  on: RedisServer[] = [server],
): Promise<RedisLocker> {
  const clients = await Promise.all(on.map((node) => client(version, node)));
  const made_ = new RedisLocker(clients.length === 1 ? (clients[0] as TestNodeRedis) : clients, options);
  made.lockers.push(made_);
  return made_;
}

/** Servers of this test only (stopped after it). */
async function ownServers(count: number): Promise<RedisServer[]> {
  const servers = await startServers(count);
  made.servers.push(...servers);
  return servers;
}

/** The InvalidArgumentError `fn` throws. */
function invalid(fn: () => unknown): InvalidArgumentError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return error as InvalidArgumentError;
  }
  throw new Error("expected an InvalidArgumentError");
}

describe("construction", () => {
  it("accepts node-redis clients and clusters of v5 and v6 and ioredis clients as RedisClient (types)", () => {
    const accepted: RedisClient[] = [
      createClient(),
      createCluster({ rootNodes: [] }),
      createClient5(),
      createCluster5({ rootNodes: [] }),
      createClient({ RESP: 3 }).withTypeMapping({}),
      new Redis({ lazyConnect: true }),
    ];
    // @ts-expect-error: not a client
    const refused: RedisClient = { sendCommand: async () => undefined };
    expect(accepted.length + [refused].length).toBe(7);
    (accepted[5] as Redis).disconnect();
  });

  it("refuses a node-redis client or cluster that is not connected, saying to connect it first", async () => {
    const closed = await client(5);
    closed.destroy();
    for (const unconnected of [createClient(), createClient5(), createCluster({ rootNodes: [] }), closed]) {
      const error = invalid(() => new RedisLocker(unconnected));
      expect(error.argument).toBe("clients");
      expect(error.message).toMatch(/await client\.connect\(\) first/);
    }
    const connected = await client();
    const inQuorum = invalid(() => new RedisLocker([connected, createClient(), admin]));
    expect(inQuorum.argument).toBe("clients[1]");
  });

  it("refuses anything else, naming both kinds of client; a node-redis sentinel is named as unsupported", () => {
    const v4 = { isOpen: true, sendCommand() {}, subscribe() {}, connect() {}, duplicate() {}, disconnect() {} };
    for (const value of [
      {},
      { sendCommand() {}, isOpen: true },
      "redis://localhost",
      null,
      createClient().legacy(),
      v4,
    ]) {
      const error = invalid(() => new RedisLocker(value as unknown as RedisClient));
      expect(error.message).toMatch(/ioredis Redis or Cluster.*node-redis client or cluster/);
    }
    const sentinel = createSentinel({ name: "mymaster", sentinelRootNodes: [{ host: "127.0.0.1", port: 1 }] });
    expect(invalid(() => new RedisLocker(sentinel as unknown as RedisClient)).message).toMatch(
      /createSentinel\(\) is not supported/,
    );
  });

  it("refuses a node-redis 6 client with a keyPrefix (the locker's prefix is the one place for it)", async () => {
    const prefixed = createClient({ url: server.url, keyPrefix: "p:" });
    prefixed.on("error", () => undefined);
    await prefixed.connect();
    made.clients.push(prefixed);
    const error = invalid(() => new RedisLocker(prefixed));
    expect(error.argument).toBe("clients.options.keyPrefix");
    expect(error.received).toBe("p:");
  });
});

describe("the caller owns the clients", () => {
  /** Subscriber connections on the shared server. */
  const subscribers = async (): Promise<number> =>
    String(await admin.call("CLIENT", "LIST", "TYPE", "pubsub"))
      .split("\n")
      .filter((line) => line.trim() !== "").length;

  it("close() leaves the caller's client open and closes the subscriber connection it duplicated", async () => {
    const own = await client();
    const before = await subscribers();
    const locker = new RedisLocker(own, { expiry: 1000 });
    const other = new RedisLocker(await client(), { expiry: 1000 });
    made.lockers.push(other);
    const key = uniqueKey("own");
    const release = await other.lock(undefined, key);
    const waiting = locker.lock(AbortSignal.timeout(5000), key); // subscribes on a duplicate
    await eventually(async () => (await subscribers()) === before + 1);
    await release();
    await (await waiting)();
    await locker.close();
    await eventually(async () => (await subscribers()) === before);
    expect(own.isOpen).toBe(true);
    expect(await own.sendCommand(["PING"] as never)).toBe("PONG");
  });

  it("a subscriber connection closed while connecting, subscribing or subscribed leaves no connection behind", async () => {
    const connections = async (): Promise<number> =>
      String(await admin.call("CLIENT", "LIST"))
        .split("\n")
        .filter((line) => line.trim() !== "").length;
    const events = { onMessage: () => undefined, onReconnect: () => undefined };
    for (const version of [6, 5] as const) {
      const connection = connectionOf(await client(version));
      const before = await connections();
      const early = Array.from({ length: 3 }, () => connection.duplicateForPubSub(events));
      const subscribing = early.map((subscriber) =>
        subscriber.subscribe("closed-early").then(
          () => "subscribed",
          () => "failed",
        ),
      );
      for (const subscriber of early) subscriber.close(); // before it even connected
      expect(await Promise.all(subscribing)).toEqual(["failed", "failed", "failed"]);
      const late = connection.duplicateForPubSub(events);
      await late.subscribe("closed-late");
      expect(await connections()).toBe(before + 1);
      late.close();
      await eventually(async () => (await connections()) === before);
      await sleep(100); // nothing connects afterwards
      expect(await connections()).toBe(before);
    }
  });
});

describe("a flushed script cache (SCRIPT FLUSH)", () => {
  it("between calls: every operation falls back to EVAL and the scripts are loaded again", async () => {
    for (const version of [6, 5] as const) {
      const holder = await locker({ expiry: 1000 }, version);
      const other = await locker({ expiry: 1000 }, version);
      const key = uniqueKey("flush");
      const release = await holder.lock(undefined, key);
      await admin.script("FLUSH");
      expect((await other.tryLock(undefined, key))[0]).toBe(false);
      await admin.script("FLUSH");
      await sleep(600); // an extension runs on the emptied cache
      expect(await admin.exists(`globallock:${key}`)).toBe(1);
      await admin.script("FLUSH");
      await release();
      expect(await admin.exists(`globallock:${key}`)).toBe(0);
      const [ok, again] = await other.tryLock(undefined, key);
      expect(ok).toBe(true);
      await again();
      // The NOSCRIPT made the runner load every script again.
      expect(await admin.script("EXISTS", ACQUIRE.sha, RELEASE.sha)).toEqual([1, 1]);
    }
  });

  it("an aborted waiter's leave-queue is not overtaken by its locker's release", async () => {
    for (let round = 0; round < 3; round++) {
      const key = uniqueKey("flush-leave");
      const own = await locker({ expiry: 5000, backoff: { min: 20, max: 100 } });
      const third = await locker({ expiry: 5000 });
      const release = await own.lock(undefined, key);
      const controller = new AbortController();
      const waiting = own.lock(controller.signal, key).catch((e: unknown) => e);
      await eventually(async () => (await admin.zcard(`{globallock:${key}}:queue`)) === 1);
      await admin.script("FLUSH");
      await admin.eval(ACQUIRE.source, 3, "{w}:lock", "{w}:queue", "{w}:alive", "t", 1000, "", "", "keep", 1000);
      await admin.eval(RELEASE.source, 1, "{w}:lock", "t", 0);
      controller.abort();
      expect(await waiting).toBe(controller.signal.reason);
      await release(); // sent right after the leave-queue, on the same connection
      // A poll in flight at the abort is cleaned up once it settles: close() waits for that.
      await own.close();
      expect(await admin.get(`globallock:${key}`)).toBeNull();
      const [ok, releaseThird] = await third.tryLock(undefined, key);
      expect(ok).toBe(true);
      await releaseThird();
    }
  });

  it("an attempt aborted in flight is cleaned up after it ran, even when it was retried as EVAL", async () => {
    for (let round = 0; round < 3; round++) {
      const key = uniqueKey("flush-abort");
      const holder = await locker({ expiry: 5000 });
      const waiterLocker = await locker({ expiry: 5000 });
      const release = await holder.lock(undefined, key);
      await admin.script("FLUSH");
      await admin.eval(LEAVE_QUEUE.source, 3, "{warm}", "{warm}:queue", "{warm}:waiters", "nobody", "", 100);
      const controller = new AbortController();
      const waiting = waiterLocker.lock(controller.signal, key).catch((e: unknown) => e);
      controller.abort();
      expect(await waiting).toBe(controller.signal.reason);
      await waiterLocker.close();
      expect(await admin.zcard(`{globallock:${key}}:queue`)).toBe(0);
      await release();
      expect(await admin.get(`globallock:${key}`)).toBeNull();
    }
  });

  it("on a quorum, a failed attempt's clean-up cannot overtake the attempt on a node whose cache was emptied", async () => {
    const quorum = await ownServers(3);
    const third = quorum[2] as RedisServer;
    const proxy = await TcpProxy.start(third.port, { latencyMs: 20 });
    try {
      const viaProxy = createClient({
        url: `redis://127.0.0.1:${proxy.port}`,
        socket: { reconnectStrategy: () => 50 },
      });
      viaProxy.on("error", () => undefined);
      await viaProxy.connect();
      made.clients.push(viaProxy);
      const holder = await locker({ expiry: 3000 }, 6, quorum);
      const [first, second] = await Promise.all([client(6, quorum[0]), client(5, quorum[1])]);
      const contender = new RedisLocker([first, second, viaProxy], { expiry: 3000 });
      made.lockers.push(contender);
      const thirdAdmin = third.client();
      try {
        const key = uniqueKey("quorum-flush");
        const lease = await holder.acquire(undefined, key);
        await thirdAdmin.del(`globallock:${key}`);
        await thirdAdmin.script("FLUSH");
        await thirdAdmin.eval(REDLOCK_RELEASE_SCRIPT, 1, "{warm-up}", "nobody");
        expect((await contender.tryLock(undefined, key))[0]).toBe(false);
        await sleep(200);
        expect(await thirdAdmin.get(`globallock:${key}`)).toBeNull();
        await lease.release();
      } finally {
        thirdAdmin.disconnect();
      }
    } finally {
      await proxy.close();
    }
  });
});

describe("faults", () => {
  it("a restart while a lock is held: the loss is reported, the next holder gets the key, the late release spares it", async () => {
    const [node] = (await ownServers(1)) as [RedisServer];
    const lost: LockLostError[] = [];
    const holder = await locker({ expiry: 600, onLockLost: (error) => lost.push(error) }, 6, [node]);
    const key = uniqueKey("restart");
    const release = await holder.lock(undefined, key);
    await node.restart();
    await eventually(() => lost.length === 1, 5000);
    expect(lost[0]?.reason).toBe("taken");
    const nodeAdmin = node.client();
    try {
      await eventually(async () => (await nodeAdmin.ping().catch(() => "")) === "PONG");
      expect(await nodeAdmin.exists(`globallock:${key}`)).toBe(0); // never re-created
      const next = await locker({ expiry: 600 }, 5, [node]);
      const releaseNext = await next.lock(AbortSignal.timeout(5000), key);
      const token = await nodeAdmin.get(`globallock:${key}`);
      await release(); // late release: must not touch the new holder's key
      expect(await nodeAdmin.get(`globallock:${key}`)).toBe(token);
      await releaseNext();
    } finally {
      nodeAdmin.disconnect();
    }
  });

  it("a frozen server (SIGSTOP): calls fail with a typed error within the timeout, never hang; nothing stale is left after SIGCONT", async () => {
    const [node] = (await ownServers(1)) as [RedisServer];
    const lost: LockLostError[] = [];
    const holder = await locker({ expiry: 1000, operationTimeout: 200, onLockLost: (e) => lost.push(e) }, 6, [node]);
    const other = await locker({ expiry: 1000 }, 5, [node]);
    const held = uniqueKey("frozen-held");
    const key = uniqueKey("frozen");
    const release = await holder.lock(undefined, held);
    node.pause();
    try {
      const started = performance.now();
      const error = await holder.tryLock(undefined, key).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(String((error as Error).cause)).toMatch(/did not answer within 200 ms/);
      expect(performance.now() - started).toBeLessThan(1000);
      await eventually(() => lost.length === 1, 3000); // no extension came back in time
      expect(lost[0]?.reason).toBe("expired");
      await release(); // queued behind the freeze; resolves within its own timeout
    } finally {
      node.resume();
    }
    // The late attempt ran after SIGCONT; the clean-up queued behind it deleted its key.
    const nodeAdmin = node.client();
    try {
      await eventually(async () => (await nodeAdmin.exists(`globallock:${key}`)) === 0, 2000);
      const [ok, releaseOther] = await other.tryLock(undefined, key);
      expect(ok).toBe(true);
      await releaseOther();
      const releaseHeld = await other.lock(AbortSignal.timeout(3000), held);
      await releaseHeld();
    } finally {
      nodeAdmin.disconnect();
    }
  });

  it("a killed server: lock and tryLock fail with a typed error within the timeout while the client reconnects", async () => {
    const [node] = (await ownServers(1)) as [RedisServer];
    const dead = await locker({ operationTimeout: 300 }, 6, [node]);
    await node.kill();
    const error = await dead.lock(undefined, uniqueKey("dead")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).cause).toBeInstanceOf(Error);
    await expect(dead.tryLock(undefined, uniqueKey("dead"))).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  for (const version of [6, 5] as const) {
    it(`v${version}: waiters still wake when the subscriber connection is dropped and the release message is lost`, async () => {
      const wakeOnly = { backoff: { min: 20_000, max: 20_000 } };
      const holder = await locker(wakeOnly, version);
      const waiter = await locker(wakeOnly, version);
      const key = uniqueKey("resubscribe");
      const release = await holder.lock(undefined, key);
      const waiting = waiter.lock(AbortSignal.timeout(5000), key);
      // Queued, and listening on the grant channel it registered (where the release will tell it).
      await eventually(async () => {
        const [registration] = await admin.hvals(`{globallock:${key}}:waiters`);
        if (registration === undefined) return false;
        const channel = registration.split(":").slice(2).join(":");
        return ((await admin.pubsub("NUMSUB", channel)) as unknown[])[1] === 1;
      });
      // Drop every subscriber connection and release while it cannot reconnect: the message is lost.
      await dropSubscribersDuring([admin], release);
      const started = performance.now();
      await (await waiting)(); // woken by the reconnection, not the 20 s safety net
      expect(performance.now() - started).toBeLessThan(3000);
      // And subscribed again: the next release wakes the next waiter by its message.
      const again = await holder.lock(undefined, key);
      const next = waiter.lock(AbortSignal.timeout(5000), key);
      await sleep(50);
      await again();
      await (await next)();
    });
  }
});

describe("quorums and fencing with node-redis", () => {
  it("mixes ioredis and node-redis v6 and v5 clients in one quorum", async () => {
    const nodes = await ownServers(3);
    const mixed = (): RedisClient[] => {
      const ioredis = (nodes[0] as RedisServer).client();
      made.clients.push({ destroy: () => ioredis.disconnect() });
      return [ioredis];
    };
    const [a, b] = await Promise.all([client(6, nodes[1]), client(5, nodes[2])]);
    const first = new RedisLocker([...mixed(), a, b], { expiry: 1000 });
    const [c, d] = await Promise.all([client(5, nodes[1]), client(6, nodes[2])]);
    const second = new RedisLocker([...mixed(), c, d], { expiry: 1000, backoff: { min: 20_000, max: 20_000 } });
    made.lockers.push(first, second);
    const key = uniqueKey("mixed");
    const release = await first.lock(undefined, key);
    expect((await second.tryLock(undefined, key))[0]).toBe(false);
    const waiting = second.lock(AbortSignal.timeout(5000), key);
    await sleep(700); // extended on every node meanwhile
    await release(); // wakes the waiter by message (its safety net is 20 s)
    await (await waiting)();
  });

  it("fencedWrite writes through a node-redis client", async () => {
    const own = await client(5);
    const key = uniqueKey("fenced");
    expect(await fencedWrite(own, key, 5n, "a")).toBe(true);
    expect(await fencedWrite(own, key, 4n, "stale")).toBe(false);
    expect(await admin.hget(key, "value")).toBe("a");
    await admin.del(key);
  });
});
