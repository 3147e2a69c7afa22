import { createHook } from "node:async_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  InvalidArgumentError,
  type LockLostError,
  MIN_EXPIRY_MS,
  RedisLocker,
  type RedisLockerOptions,
} from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, sleep, untilWaiting } from "../helpers/wait.js";

let fixture: RedisFixture;
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
});
afterAll(async () => {
  await fixture?.stop();
});

describe("RedisLocker on one node", () => {
  it("stores prefix + key with a token (the owner, then 16 random bytes) and a TTL of expiry", async () => {
    const admin = fixture.admin();
    const locker = fixture.locker({ expiry: 5000, owner: "web 1:42/é" });
    const key = uniqueKey();
    const release = await locker.lock(undefined, key);
    const token = await admin.get(`globallock:${key}`);
    expect(token).toMatch(/^web%201%3A42%2F%C3%A9\/[0-9a-f]{32}$/);
    const ttl = await admin.pttl(`globallock:${key}`);
    expect(ttl).toBeGreaterThan(4000);
    expect(ttl).toBeLessThanOrEqual(5000);
    await release();
    expect(await admin.exists(`globallock:${key}`)).toBe(0);

    const custom = fixture.locker({ prefix: "app:locks:" });
    const release2 = await custom.lock(undefined, key);
    expect(await admin.exists(`app:locks:${key}`)).toBe(1);
    await release2();
    const bare = fixture.locker({ prefix: "" });
    const release3 = await bare.lock(undefined, key);
    expect(await admin.exists(key)).toBe(1);
    await release3();
  });

  it("the sweeper keeps a lock with expiry 1000 alive for 3.5 s; another locker cannot take it", async () => {
    const admin = fixture.admin();
    const holder = fixture.locker({ expiry: 1000 });
    const other = fixture.locker({ expiry: 1000 });
    const key = uniqueKey();
    const release = await holder.lock(undefined, key);
    const start = Date.now();
    while (Date.now() - start < 3500) {
      expect((await other.tryLock(undefined, key))[0]).toBe(false);
      expect(await admin.pttl(`globallock:${key}`)).toBeGreaterThan(0);
      await sleep(100);
    }
    await release();
    expect((await other.tryLock(undefined, key))[0]).toBe(true);
  });

  it("reports a lock deleted behind its holder's back; the holder goes on; its late release spares the next holder", async () => {
    const admin = fixture.admin();
    const lost: LockLostError[] = [];
    // Leases whose command timeouts (expiry / 4) a loaded machine does not reach.
    const holder = fixture.locker({ expiry: 3000, onLockLost: (error) => lost.push(error) });
    const next = fixture.locker({ expiry: 3000 });
    const key = uniqueKey();
    const release = await holder.lock(undefined, key);
    await admin.del(`globallock:${key}`); // simulated loss (e.g. a failover without the key)
    await eventually(() => lost.length === 1, 10_000); // at the next extension
    expect(lost[0]?.code).toBe("ERR_GLOBALLOCK_LOCK_LOST");
    expect(lost[0]?.key).toBe(key);
    expect(lost[0]?.reason).toBe("taken");
    expect(holder.heldCount).toBe(0); // no longer extended
    expect(await admin.exists(`globallock:${key}`)).toBe(0); // never re-created
    const releaseNext = await next.lock(AbortSignal.timeout(5000), key);
    const nextToken = await admin.get(`globallock:${key}`);
    await release(); // the lost holder's late release
    expect(await admin.get(`globallock:${key}`)).toBe(nextToken);
    await releaseNext();
  });

  it("a throwing onLockLost hook causes no unhandled rejection", async () => {
    const admin = fixture.admin();
    let calls = 0;
    const holder = fixture.locker({
      expiry: 2000, // its command timeout (500 ms) is not reached on a loaded machine
      onLockLost: () => {
        calls += 1;
        throw new Error("hook failed");
      },
    });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on("unhandledRejection", onUnhandled);
    try {
      const key = uniqueKey();
      await holder.lock(undefined, key);
      await admin.del(`globallock:${key}`);
      await eventually(() => calls === 1, 10_000);
      await sleep(50);
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("sends nothing to Redis for an already-aborted signal or invalid input", async () => {
    const admin = fixture.admin();
    const locker = fixture.locker();
    const commands = async (): Promise<string> => {
      const info = (await admin.info("commandstats")) ?? "";
      return info
        .split("\n")
        .filter((line) => /cmdstat_(evalsha|eval|set|get|del|subscribe):/.test(line))
        .join("\n");
    };
    const before = await commands();
    const signal = AbortSignal.abort();
    await expect(locker.lock(signal, uniqueKey())).rejects.toBe(signal.reason);
    await expect(locker.tryLock(signal, uniqueKey())).rejects.toBe(signal.reason);
    await expect(locker.lock(undefined, "")).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await commands()).toBe(before);
  });

  it("close() leaves the caller's client open and held keys in place, no longer extended", async () => {
    const client = fixture.admin();
    const admin = fixture.admin();
    const locker = new RedisLocker(client, { expiry: 600 });
    const key = uniqueKey();
    await locker.lock(undefined, key);
    await locker.close();
    expect(client.status).toBe("ready");
    expect(await client.ping()).toBe("PONG");
    expect(await admin.exists(`globallock:${key}`)).toBe(1);
    await eventually(async () => (await admin.exists(`globallock:${key}`)) === 0, 3000);
  });

  it("leaves no keys, subscriptions or tracked locks behind", async () => {
    const admin = fixture.admin();
    const locker = fixture.locker({ prefix: "leakcheck:" });
    const peer = fixture.locker({ prefix: "leakcheck:" });
    const keys = Array.from({ length: 5 }, () => uniqueKey());
    const releases = await Promise.all(keys.map((key) => locker.lock(undefined, key)));
    const controllers = keys.map(() => new AbortController());
    const waits = keys.map((key, i) => peer.lock(controllers[i]?.signal, key).catch(() => undefined));
    await untilWaiting(peer, 5);
    // The waiting locker listens on one channel, its own grant channel, however many keys it waits for.
    await eventually(async () => ((await admin.pubsub("CHANNELS", "leakcheck:*")) as string[]).length > 0);
    expect((await admin.pubsub("CHANNELS", "leakcheck:*")) as string[]).toEqual([
      expect.stringMatching(/^leakcheck:grant:[0-9a-f]{16}$/),
    ]);
    for (const c of controllers) c.abort();
    await Promise.all(waits);
    await Promise.all(releases.map((release) => release()));
    expect(locker.heldCount).toBe(0);
    await eventually(async () => ((await admin.pubsub("CHANNELS", "leakcheck:*")) as string[]).length === 0);
    expect(await admin.keys("*leakcheck*")).toEqual([]); // lock keys and grant queues
  });

  it("leaves no timers behind once its locks are released and it is closed", async () => {
    const locker = fixture.locker({ expiry: 1000 });
    await (await locker.lock(undefined, uniqueKey()))(); // warm up the connections
    // Timers set by globallock's own code from here on (not ioredis's: its graceful disconnect
    // keeps a timer until the server has closed the socket, which on a loaded machine can be
    // after close() resolved) that would keep the process alive (unref'ed ones, such as the
    // command-timeout interval that stops at its next check, do not).
    const ours = timersSetBy(/\/src\//);
    try {
      const key = uniqueKey();
      for (let round = 0; round < 20; round++) {
        const release = await locker.lock(undefined, key);
        const controller = new AbortController();
        const aborted = locker.lock(controller.signal, key).catch(() => undefined);
        const waiting = locker.lock(undefined, key);
        await sleep(5);
        controller.abort();
        await aborted;
        await release();
        await (await waiting)();
      }
      expect(locker.heldCount).toBe(0);
      expect(ours.count()).toBeGreaterThan(0); // the tracking sees them
      await locker.close();
      expect(await ours.pending()).toEqual([]);
    } finally {
      ours.stop();
    }
  });

  it("hands a hot key between two lockers many times without loss or overlap", async () => {
    const a = fixture.locker({ expiry: 2000 });
    const b = fixture.locker({ expiry: 2000 });
    const key = uniqueKey();
    let inside = 0;
    let maxInside = 0;
    let done = 0;
    const worker = async (locker: RedisLocker): Promise<void> => {
      for (let i = 0; i < 40; i++) {
        const release = await locker.lock(AbortSignal.timeout(10_000), key);
        inside += 1;
        maxInside = Math.max(maxInside, inside);
        await sleep(1);
        inside -= 1;
        done += 1;
        await release();
      }
    };
    await Promise.all([worker(a), worker(a), worker(b), worker(b)]);
    expect(done).toBe(160);
    expect(maxInside).toBe(1);
  });
});

describe("RedisLocker input validation", () => {
  const bad: Array<[string, RedisLockerOptions, RegExp]> = [
    ["expiry 0", { expiry: 0 }, /options\.expiry.*number 0/],
    ["negative expiry", { expiry: -5 }, /options\.expiry.*number -5/],
    ["fractional expiry", { expiry: 1000.5 }, /options\.expiry.*number 1000\.5/],
    ["string expiry", { expiry: "1000" as never }, /options\.expiry.*string "1000"/],
    ["NaN expiry", { expiry: Number.NaN }, /options\.expiry.*NaN/],
    ["too-short expiry", { expiry: MIN_EXPIRY_MS - 1 }, new RegExp(`>= ${MIN_EXPIRY_MS}.*${MIN_EXPIRY_MS - 1}`)],
    ["unsafe expiry", { expiry: 2 ** 60 }, /options\.expiry/],
    ["non-string prefix", { prefix: 5 as never }, /options\.prefix.*number 5/],
    ["operationTimeout >= expiry / 2", { expiry: 1000, operationTimeout: 500 }, /operationTimeout.*500/],
    ["bad driftFactor", { driftFactor: 2 }, /driftFactor.*number 2/],
    ["bad backoff", { backoff: { min: 0 } }, /backoff\.min.*number 0/],
    ["backoff max below min", { backoff: { min: 100, max: 10 } }, /backoff\.max.*number 10/],
    ["bad sweepConcurrency", { sweepConcurrency: 0 }, /sweepConcurrency/],
    ["non-function onLockLost", { onLockLost: "x" as never }, /onLockLost.*function/],
  ];
  for (const [label, options, message] of bad) {
    it(`rejects ${label}`, () => {
      const client = fixture.admin();
      expect(() => new RedisLocker(client, options)).toThrow(InvalidArgumentError);
      expect(() => new RedisLocker(client, options)).toThrow(message);
    });
  }

  it("rejects missing, empty, duplicate and non-client clients", () => {
    const client = fixture.admin();
    expect(() => new RedisLocker(undefined as never)).toThrow(/clients.*ioredis.*undefined/);
    expect(() => new RedisLocker([] as never)).toThrow(/clients.*non-empty array.*array of length 0/);
    expect(() => new RedisLocker({} as never)).toThrow(/clients.*ioredis.*object Object/);
    expect(() => new RedisLocker([client, client] as never)).toThrow(/distinct clients/);
    // An even quorum can tie, and redlock never settles a tied vote: refused up front.
    expect(() => new RedisLocker([fixture.admin(), fixture.admin()])).toThrow(
      /odd number of Redis nodes.*array of length 2/,
    );
    expect(() => new RedisLocker([fixture.admin(), fixture.admin(), fixture.admin(), fixture.admin()])).toThrow(
      InvalidArgumentError,
    );
    expect(() => new RedisLocker("redis://x" as never)).toThrow(InvalidArgumentError);
    expect(() => new RedisLocker(client as never, "opts" as never)).toThrow(/options.*string "opts"/);
  });

  it("rejects a client with a keyPrefix (the locker's prefix is the one place for it)", () => {
    const server = fixture.servers[0];
    if (server === undefined) throw new Error("no server");
    const client = server.client({ keyPrefix: "p:" });
    fixture.clients.push(client);
    expect(() => new RedisLocker(client)).toThrow(/keyPrefix.*string "p:"/);
  });
});

/**
 * Tracks the timers (`setTimeout`, `setInterval`) set from now on by code whose file matches
 * `origin` (the frame that called the timer function). `pending()` lists the creation frames of
 * those neither cleared nor fired yet that are ref'ed (keep the process alive).
 */
function timersSetBy(origin: RegExp): { count(): number; pending(): Promise<string[]>; stop(): void } {
  const live = new Map<number, [frame: string, timer: { hasRef(): boolean }]>();
  let count = 0;
  const hook = createHook({
    init(id, type, _trigger, resource) {
      if (type !== "Timeout") return;
      const frames = (new Error().stack ?? "").split("\n");
      const caller = frames.findIndex((frame) => /\bat (setTimeout|setInterval) /.test(frame)) + 1;
      const frame = frames[caller] ?? "";
      if (caller > 0 && origin.test(frame) && !frame.includes("node_modules")) {
        live.set(id, [frame.trim(), resource as { hasRef(): boolean }]);
        count += 1;
      }
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  return {
    count: () => count,
    pending: async () => {
      // Destroy hooks of timers cleared just now run a little later.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      return [...live.values()].filter(([, timer]) => timer.hasRef()).map(([frame]) => frame);
    },
    stop: () => hook.disable(),
  };
}
