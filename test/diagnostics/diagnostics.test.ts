/**
 * The diagnostics channels (src/diagnostics.ts) on every memory and Redis locker, against real
 * redis-server processes: what each channel publishes and when, for every way a call can end, and
 * that subscribing and unsubscribing leave nothing behind and a throwing subscriber breaks nothing.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import diagnostics_channel from "node:diagnostics_channel";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ACQUIRE_CHANNEL,
  type AcquireMessage,
  EXTEND_CHANNEL,
  type ExtendMessage,
  LOST_CHANNEL,
  LockLostError,
  MemoryLocker,
  MemoryReadWriteLocker,
  MemorySemaphore,
  RELEASE_CHANNEL,
  RedisLocker,
  type RedisLockerOptions,
  RedisReadWriteLocker,
  RedisSemaphore,
  StoreUnavailableError,
} from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { diagnosticsContract, type Subject } from "../contracts/diagnostics-contract.js";
import { Recorder, recording } from "../helpers/diagnostics-recorder.js";
import { freePort, type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually, sleep } from "../helpers/wait.js";

let servers: RedisServer[];
const clients: Redis[] = [];
const closables: Array<{ close(): Promise<void> }> = [];

function client(server: RedisServer | undefined = servers[0]): Redis {
  if (server === undefined) throw new Error("no server");
  const created = server.client();
  clients.push(created);
  return created;
}

function keep<T extends { close(): Promise<void> }>(closable: T): T {
  closables.push(closable);
  return closable;
}

beforeAll(async () => {
  servers = await startServers(1);
});
afterAll(async () => {
  await Promise.allSettled(closables.map((closable) => closable.close()));
  for (const created of clients) created.disconnect();
  await stopServers(servers);
});

const LIMIT = 2;
const subjects: Subject[] = [
  {
    kind: "memory-lock",
    weight: 1,
    heldHere: true,
    setup: () => {
      const locker = keep(new MemoryLocker());
      return { locker, block: (key) => locker.acquire(undefined, key) };
    },
  },
  {
    kind: "memory-semaphore",
    weight: LIMIT,
    setup: () => {
      const locker = keep(new MemorySemaphore({ limit: LIMIT }));
      return { locker, block: (key) => locker.acquire(undefined, key, { weight: LIMIT }) };
    },
  },
  {
    kind: "memory-read",
    weight: 1,
    setup: () => {
      const rw = keep(new MemoryReadWriteLocker());
      return { locker: rw.read, block: (key) => rw.write.acquire(undefined, key) };
    },
  },
  {
    kind: "memory-write",
    weight: 1,
    setup: () => {
      const rw = keep(new MemoryReadWriteLocker());
      return { locker: rw.write, block: (key) => rw.read.acquire(undefined, key) };
    },
  },
  {
    kind: "redis-lock",
    weight: 1,
    setup: () => {
      const peer = keep(new RedisLocker(client()));
      return { locker: keep(new RedisLocker(client())), block: (key) => peer.acquire(undefined, key) };
    },
  },
  {
    kind: "redis-semaphore",
    weight: LIMIT,
    setup: () => {
      const peer = keep(new RedisSemaphore(client(), { limit: LIMIT }));
      return {
        locker: keep(new RedisSemaphore(client(), { limit: LIMIT })),
        block: (key) => peer.acquire(undefined, key, { weight: LIMIT }),
      };
    },
  },
  {
    kind: "redis-read",
    weight: 1,
    setup: () => {
      const peer = keep(new RedisReadWriteLocker(client()));
      return {
        locker: keep(new RedisReadWriteLocker(client())).read,
        block: (key) => peer.write.acquire(undefined, key),
      };
    },
  },
  {
    kind: "redis-write",
    weight: 1,
    setup: () => {
      const peer = keep(new RedisReadWriteLocker(client()));
      return {
        locker: keep(new RedisReadWriteLocker(client())).write,
        block: (key) => peer.read.acquire(undefined, key),
      };
    },
  },
];

diagnosticsContract(subjects);

describe("memory leases", () => {
  it("autoExtend: false reaching its expiry: an expected loss, then a release that found it expired", async () => {
    const locker = keep(new MemorySemaphore({ limit: 3 }));
    const key = uniqueKey();
    const recorder = await recording(async () => {
      const lease = await locker.acquire(undefined, key, { weight: 2, autoExtend: false, expiry: 50 });
      await eventually(() => lease.lost.aborted, 2000);
      expect(await lease.releaseWithOutcome()).toBe("expired");
    });
    expect(recorder.lost).toEqual([
      { key, locker, kind: "memory-semaphore", reason: "expired", error: expect.any(LockLostError), expected: true },
    ]);
    expect(recorder.releases).toEqual([expect.objectContaining({ key, locker, outcome: "expired" })]);
    expect(recorder.releases[0]?.heldMs).toBeGreaterThanOrEqual(45);
  });

  it("a grant made while nobody listened is released without a hold time", async () => {
    const locker = keep(new MemoryLocker());
    const key = uniqueKey();
    const release = await locker.lock(undefined, key);
    const lease = await locker.acquire(undefined, uniqueKey());
    const recorder = await recording(async () => {
      await release();
      await lease.release();
    });
    expect(recorder.releases.map((m) => [m.outcome, m.heldMs])).toEqual([
      ["released", undefined],
      ["released", undefined],
    ]);
  });
});

describe("Redis", () => {
  it("an unreachable Redis: outcome error with the StoreUnavailableError, one attempt", async () => {
    const port = await freePort(); // nothing listens here
    const offline = new Redis({ host: "127.0.0.1", port });
    offline.on("error", () => undefined);
    clients.push(offline);
    const locker = keep(new RedisLocker(offline, { operationTimeout: 200 }));
    const recorder = await recording(async () => {
      await expect(locker.lock(undefined, uniqueKey())).rejects.toBeInstanceOf(StoreUnavailableError);
    });
    const events = recorder.acquiresOf(locker);
    expect(events.map((e) => e.event)).toEqual(["start", "end", "error", "asyncStart", "asyncEnd"]);
    expect(events[4]).toMatchObject({ outcome: "error", attempts: 1, kind: "redis-lock" });
    expect(events[4]?.error).toBeInstanceOf(StoreUnavailableError);
  });

  it("a contended Redis waiter counts its attempts; RedisReadWriteLocker counts both views", async () => {
    const rw = keep(new RedisReadWriteLocker(client()));
    const key = uniqueKey();
    const writer = await rw.write.acquire(undefined, key);
    const recorder = await recording(async () => {
      const reader = rw.read.acquire(undefined, key);
      await eventually(() => rw.waitingCount === 1, 3000);
      expect(rw.heldCount).toBe(1);
      await writer.release();
      await (await reader).release();
    });
    expect(rw.waitingCount).toBe(0);
    const [outcome] = recorder.outcomesOf(rw.read);
    expect(outcome).toMatchObject({ kind: "redis-read", outcome: "acquired" });
    expect(outcome?.attempts).toBeGreaterThanOrEqual(1);
    // The write lease was granted before anyone listened; the read lease while someone did.
    expect(recorder.releases.map((m) => [m.kind, m.outcome, m.heldMs === undefined])).toEqual([
      ["redis-write", "released", true],
      ["redis-read", "released", false],
    ]);
  });

  it("release outcomes: expired when the key was deleted behind the holder's back, taken when it was reset", async () => {
    const admin = client();
    const locker = keep(new RedisLocker(client(), { expiry: 10_000 }));
    const gone = uniqueKey();
    const stolen = uniqueKey();
    const recorder = await recording(async () => {
      const first = await locker.acquire(undefined, gone);
      const second = await locker.acquire(undefined, stolen);
      await admin.del(`globallock:${gone}`);
      await admin.set(`globallock:${stolen}`, "someone else");
      expect(await first.releaseWithOutcome()).toBe("expired");
      expect(await second.releaseWithOutcome()).toBe("taken");
    });
    expect(recorder.releases.map((m) => [m.key, m.outcome])).toEqual([
      [gone, "expired"],
      [stolen, "taken"],
    ]);
    for (const message of recorder.releases) expect(message.heldMs).toBeGreaterThanOrEqual(0);
  });

  it("extensions: one message per batch with its count and keys; lag is how late the sweep ran", async () => {
    const locker = keep(new RedisLocker(client(), { expiry: 1000 }));
    const keys = [uniqueKey(), uniqueKey(), uniqueKey()];
    const recorder = await recording(async (live) => {
      const leases = await Promise.all(keys.map((key) => locker.acquire(undefined, key)));
      // Due about 500 ms after the grant; the event loop is busy until 750 ms (the deadline is ~990).
      const busyUntil = performance.now() + 750;
      while (performance.now() < busyUntil) {
        // a long synchronous task
      }
      await eventually(() => live.extends.some((m) => m.locker === locker), 3000);
      for (const lease of leases) lease.assertHeld();
      await Promise.all(leases.map((lease) => lease.release()));
    });
    const [batch] = recorder.extends.filter((m) => m.locker === locker);
    expect(batch).toMatchObject({ kind: "redis-lock", outcome: "extended", count: 3, error: undefined });
    expect([...(batch?.keys ?? [])].sort()).toEqual([...keys].sort());
    expect(batch?.key).toBe(batch?.keys[0]);
    expect(batch?.lagMs).toBeGreaterThanOrEqual(150);
    expect(batch?.elapsedMs).toBeGreaterThanOrEqual(0);
    expect(recorder.lost).toEqual([]);
  });

  it("a lock deleted behind its holder: extend says taken, then lost (taken, not expected)", async () => {
    const admin = client();
    const locker = keep(new RedisLocker(client(), { expiry: 400 }));
    const key = uniqueKey();
    const recorder = await recording(async () => {
      const lease = await locker.acquire(undefined, key);
      await admin.del(`globallock:${key}`);
      await eventually(() => lease.lost.aborted, 3000);
    });
    const taken = recorder.extends.find((m) => m.outcome === "taken");
    expect(taken).toMatchObject({ key, keys: [key], count: 1, locker, kind: "redis-lock" });
    expect(recorder.lost).toEqual([
      { key, locker, kind: "redis-lock", reason: "taken", error: expect.any(LockLostError), expected: false },
    ]);
    // The extension's message comes first.
    const channels = recorder.order.map(([name]) => name).filter((name) => name !== ACQUIRE_CHANNEL);
    expect(channels.indexOf(EXTEND_CHANNEL)).toBeLessThan(channels.indexOf(LOST_CHANNEL));
  });

  it("autoExtend: false reaching its expiry is an expected loss", async () => {
    const locker = keep(new RedisLocker(client()));
    const key = uniqueKey();
    const recorder = await recording(async () => {
      const lease = await locker.acquire(undefined, key, { autoExtend: false, expiry: 300 });
      await eventually(() => lease.lost.aborted, 3000);
      // (Its local deadline is passed a little before the key expires in Redis: not asserted.)
      await lease.release();
    });
    expect(recorder.lost).toEqual([
      { key, locker, kind: "redis-lock", reason: "expired", error: expect.any(LockLostError), expected: true },
    ]);
    expect(recorder.extends.filter((m) => m.locker === locker)).toEqual([]);
  });

  it("a frozen server (SIGSTOP): retry with the error, extended after SIGCONT; frozen past the lease: lost", async () => {
    const [frozen] = await startServers(1);
    try {
      // A command timeout a loaded machine does not reach by itself, and a lease with room for a
      // retry after it; the waits below are conditions (the freeze lasts until the retry is seen).
      const options: RedisLockerOptions = { expiry: 4000, operationTimeout: 600 };
      const locker = keep(new RedisLocker(client(frozen), options));
      const recorder = await recording(async (live) => {
        const survivor = await locker.acquire(undefined, uniqueKey());
        frozen?.pause();
        await eventually(() => live.extends.some((m) => m.outcome === "retry"), 10_000);
        frozen?.resume();
        await eventually(() => live.extends.some((m) => m.outcome === "extended"), 10_000);
        survivor.assertHeld();
        await survivor.release();

        const victim = await locker.acquire(undefined, uniqueKey());
        frozen?.pause();
        await eventually(() => victim.lost.aborted, 10_000);
        frozen?.resume();
        await victim.release();
      });
      const retry = recorder.extends.find((m) => m.outcome === "retry");
      expect(retry).toMatchObject({ locker, count: 1 });
      expect(retry?.error).toBeInstanceOf(StoreUnavailableError);
      const extendedAfterRetry = recorder.extends.findIndex((m) => m.outcome === "extended");
      expect(extendedAfterRetry).toBeGreaterThan(recorder.extends.indexOf(retry as ExtendMessage));
      expect(recorder.lost).toEqual([
        expect.objectContaining({ locker, reason: "expired", expected: false, error: expect.any(LockLostError) }),
      ]);
    } finally {
      frozen?.resume();
      await stopServers(frozen === undefined ? [] : [frozen]);
    }
  });
});

describe("subscribers", () => {
  it("a store bound to the start channel is the call's async context (as with tracePromise)", async () => {
    const tracing = diagnostics_channel.tracingChannel<unknown, AcquireMessage>(ACQUIRE_CHANNEL);
    const storage = new AsyncLocalStorage<{ key: string }>();
    const seen: Array<[string, string | undefined]> = [];
    const onAsyncEnd = (message: unknown): void => {
      seen.push([(message as AcquireMessage).key, storage.getStore()?.key]);
    };
    tracing.start.bindStore(storage, (message) => ({ key: message.key }));
    tracing.asyncEnd.subscribe(onAsyncEnd);
    try {
      for (const locker of [keep(new MemoryLocker()), keep(new RedisLocker(client()))]) {
        const key = uniqueKey();
        const release = await locker.lock(undefined, key);
        expect(storage.getStore()).toBeUndefined();
        await release();
      }
    } finally {
      tracing.asyncEnd.unsubscribe(onAsyncEnd);
      tracing.start.unbindStore(storage);
    }
    expect(seen).toHaveLength(2);
    for (const [key, stored] of seen) expect(stored).toBe(key);
  });

  const names = [
    ...["start", "end", "asyncStart", "asyncEnd", "error"].map((event) => `tracing:${ACQUIRE_CHANNEL}:${event}`),
    RELEASE_CHANNEL,
    EXTEND_CHANNEL,
    LOST_CHANNEL,
  ];

  it("added and removed leave nothing behind: no subscriber, nothing published, no hold time taken", async () => {
    const before = names.map((name) => diagnostics_channel.hasSubscribers(name));
    const recorder = new Recorder();
    expect(names.every((name) => diagnostics_channel.hasSubscribers(name))).toBe(true);
    recorder.stop();
    expect(names.map((name) => diagnostics_channel.hasSubscribers(name))).toEqual(before);
    expect(before.every((subscribed) => !subscribed)).toBe(true);

    const memory = keep(new MemoryLocker());
    const redis = keep(new RedisLocker(client(), { expiry: 400 }));
    const grants = await Promise.all(
      [memory, redis].map(
        async (locker) =>
          [await locker.lock(undefined, uniqueKey()), await locker.acquire(undefined, uniqueKey())] as const,
      ),
    );
    await sleep(300); // the Redis leases are extended meanwhile
    const late = await recording(async () => {
      for (const [release, lease] of grants) {
        await release();
        await lease.release();
      }
    });
    expect(recorder.acquires).toEqual([]);
    expect(recorder.releases).toEqual([]);
    expect(recorder.extends).toEqual([]);
    // Granted while nobody listened: released without a hold time.
    expect(late.releases.map((m) => m.heldMs)).toEqual([undefined, undefined, undefined, undefined]);
  });

  it("a throwing subscriber never breaks a lock: Node.js rethrows its error on the next tick, outside the lock", async () => {
    const tracing = diagnostics_channel.tracingChannel(ACQUIRE_CHANNEL);
    const boom = (): never => {
      throw new Error("subscriber bug");
    };
    const handlers = { start: boom, end: boom, asyncStart: boom, asyncEnd: boom, error: boom };
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown): void => {
      uncaught.push(error);
    };
    const saved = process.listeners("uncaughtException");
    process.removeAllListeners("uncaughtException");
    process.on("uncaughtException", onUncaught);
    tracing.subscribe(handlers);
    for (const name of [RELEASE_CHANNEL, EXTEND_CHANNEL, LOST_CHANNEL]) diagnostics_channel.subscribe(name, boom);
    try {
      const admin = client();
      const memory = keep(new MemoryLocker());
      // Leases long enough that a loaded machine's stalls do not make one run out unextended.
      const redis = keep(new RedisLocker(client(), { expiry: 1200 }));
      for (const locker of [memory, redis]) {
        const key = uniqueKey();
        const release = await locker.lock(undefined, key);
        const [acquired] = await locker.tryLock(undefined, key);
        expect(acquired).toBe(false);
        await release();
        const lease = await locker.acquire(undefined, key);
        lease.assertHeld();
        expect(await lease.releaseWithOutcome()).toBe("released");
      }
      // Extensions and a loss with a throwing subscriber: the keeper goes on.
      const lost = await redis.acquire(undefined, uniqueKey());
      const kept = await redis.acquire(undefined, uniqueKey());
      await admin.del(`globallock:${lost.key}`);
      await eventually(() => lost.lost.aborted, 10_000);
      await eventually(() => redis.leaseStats.extensions > 0, 10_000);
      kept.assertHeld();
      await kept.release();
      await sleep(10);
    } finally {
      tracing.unsubscribe(handlers);
      for (const name of [RELEASE_CHANNEL, EXTEND_CHANNEL, LOST_CHANNEL]) diagnostics_channel.unsubscribe(name, boom);
      process.off("uncaughtException", onUncaught);
      for (const listener of saved) process.on("uncaughtException", listener);
    }
    expect(uncaught.length).toBeGreaterThan(10);
    for (const error of uncaught) expect((error as Error).message).toBe("subscriber bug");
  });
});
