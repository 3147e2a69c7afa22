/**
 * RedisSemaphore and RedisReadWriteLocker against real redis-server processes: what only Redis can
 * show (keys left behind, a holder process SIGKILLed, a quorum refused, extension by the sweeper).
 * The shared contract suites run in redis-primitives.test.ts.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  InvalidArgumentError,
  type Lease,
  type LockLostError,
  READ_WRITE_PREFIX,
  RedisReadWriteLocker,
  RedisSemaphore,
  type RedisSemaphoreOptions,
  SEMAPHORE_PREFIX,
  UnsupportedError,
} from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually, sleep } from "../helpers/wait.js";

let servers: RedisServer[];
const clients: Redis[] = [];
const closables: Array<{ close(): Promise<void> }> = [];

function client(index = 0): Redis {
  const server = servers[index];
  if (server === undefined) throw new Error(`no server #${index}`);
  const created = server.client();
  clients.push(created);
  return created;
}

function semaphore(options: RedisSemaphoreOptions): RedisSemaphore {
  const created = new RedisSemaphore(client(), options);
  closables.push(created);
  return created;
}

function readWrite(): RedisReadWriteLocker {
  const created = new RedisReadWriteLocker(client());
  closables.push(created);
  return created;
}

/** Every key of `prefix` (and its companions) on the first server. */
async function keysOf(admin: Redis, prefix: string, key: string): Promise<string[]> {
  return (await admin.keys("*")).filter((name) => name.includes(prefix + key)).sort();
}

/**
 * The top-level commands every client sends to the first server, from MONITOR (which marks the
 * commands a script runs as "lua": those are left out), read through `admin`: the ZREMs of
 * `holders` sent while a step ran, and the script calls on it so far.
 */
async function commandLog(admin: Redis, holders: string) {
  const monitor = await client().monitor();
  const sent: string[][] = [];
  let scriptCalls = 0;
  monitor.on("monitor", (_time: string, args: string[], source: string) => {
    if (source === "lua") return;
    sent.push(args);
    if (args[0]?.toLowerCase() === "evalsha" && args[3] === holders) scriptCalls += 1;
  });
  return {
    /** The ZREMs of `holders` sent while `run` ran (a marker ECHO closes the window: MONITOR is in order). */
    async zremsDuring(run: () => Promise<unknown>): Promise<number> {
      const marker = `marker-${Math.random()}`;
      sent.length = 0;
      await run();
      await admin.echo(marker);
      await eventually(() => sent.some((args) => args[0]?.toLowerCase() === "echo" && args[1] === marker));
      return sent.filter((args) => args[0]?.toLowerCase() === "zrem" && args[1] === holders).length;
    },
    get scriptCalls(): number {
      return scriptCalls;
    },
    stop: () => monitor.disconnect(),
  };
}

beforeAll(async () => {
  servers = await startServers(3);
});

afterAll(async () => {
  await Promise.allSettled(closables.map((closable) => closable.close()));
  for (const created of clients) created.disconnect();
  await stopServers(servers ?? []);
});

describe("RedisSemaphore on one node", () => {
  it("rejects a bad limit and unknown options with a typed error naming the value", () => {
    const c = client();
    for (const limit of [undefined, 0, -1, 1.5, "2", null, Number.MAX_SAFE_INTEGER + 1]) {
      expect(() => new RedisSemaphore(c, { limit } as never)).toThrow(InvalidArgumentError);
    }
    expect(() => new RedisSemaphore(c, { limit: 0 })).toThrow(/options\.limit.*number 0/);
    expect(() => new RedisSemaphore(c, undefined as never)).toThrow(/options\.limit/);
    expect(() => new RedisSemaphore(c, { limit: 2, colour: "red" } as never)).toThrow(/options\.colour/);
  });

  it("refuses a Redlock quorum at construction, saying why (both counted lockers)", () => {
    const quorum = [client(0), client(1), client(2)];
    expect(() => new RedisSemaphore(quorum, { limit: 2 })).toThrow(UnsupportedError);
    expect(() => new RedisSemaphore(quorum, { limit: 2 })).toThrow(/exceed the limit/);
    expect(() => new RedisReadWriteLocker(quorum)).toThrow(UnsupportedError);
  });

  it("checks weight and fencing against the limit before anything is sent", async () => {
    const s = semaphore({ limit: 3 });
    const key = uniqueKey("sem-args");
    for (const weight of [0, 4, 1.5, "2", null]) {
      await expect(s.acquire(undefined, key, { weight } as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    await expect(s.acquire(undefined, key, { weight: 4 })).rejects.toThrow(/weight.*1 to 3.*number 4/);
    await expect(s.acquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
    await expect(s.tryAcquire(undefined, key, { expiry: 10 })).rejects.toThrow(/options\.expiry/);
    expect(await keysOf(client(), SEMAPHORE_PREFIX, key)).toEqual([]);
    const one = semaphore({ limit: 1 });
    const lease = await one.acquire(undefined, key, { fencing: true });
    expect(typeof lease.fencingToken).toBe("bigint");
    await lease.release();
  });

  it("registers a waiter's grant channel whole from the settings each attempt sends (a prefix with spaces and colons)", async () => {
    const prefix = "my app: semaphores ";
    const key = uniqueKey("sem-settings");
    const [a, b] = [semaphore({ limit: 2, prefix }), semaphore({ limit: 2, prefix })];
    const admin = client();
    const held = await a.acquire(undefined, key, { weight: 2 });
    const waiting = b.acquire(undefined, key);
    let registrations: string[] = [];
    await eventually(async () => {
      registrations = Object.values(await admin.hgetall(`{${prefix}${key}}:waiters`));
      return registrations.length === 1;
    });
    // "<liveness deadline>:<token>:<grant channel>": the channel is the prefix's, spaces and all.
    const [deadline, token, ...channel] = (registrations[0] ?? "").split(":");
    expect(Number(deadline)).toBeGreaterThan(0);
    expect(token).toMatch(/\/[0-9a-f]{32}$/);
    expect(channel.join(":")).toMatch(/^my app: semaphores grant:[0-9a-f]{16}$/);
    await held.release();
    await (await waiting).release();
    expect(await keysOf(admin, prefix, key)).toEqual([]);
  });

  it("serves weights in arrival order across processes: a heavy waiter is not overtaken by light ones", async () => {
    const key = uniqueKey("sem-fifo");
    const [a, b, c] = [semaphore({ limit: 3 }), semaphore({ limit: 3 }), semaphore({ limit: 3 })];
    const holders = await Promise.all([1, 2, 3].map(() => a.acquire(undefined, key)));
    const order: string[] = [];
    const heavy = b.acquire(undefined, key, { weight: 3 }).then((lease) => {
      order.push("heavy");
      return lease;
    });
    await sleep(50);
    const lights = [1, 2].map(() =>
      c.acquire(undefined, key).then((lease) => {
        order.push("light");
        return lease;
      }),
    );
    await sleep(50);
    // One permit free: the lights would fit, but the heavy waiter is ahead of them.
    await holders[0]?.release();
    await sleep(150);
    expect(order).toEqual([]);
    // Nor may a new caller take it: someone is queued ahead.
    expect(await c.tryAcquire(undefined, key)).toBeUndefined();
    await holders[1]?.release();
    await holders[2]?.release();
    const heavyLease = await heavy;
    await sleep(100);
    expect(order).toEqual(["heavy"]);
    await heavyLease.release();
    const lightLeases = await Promise.all(lights);
    expect(order).toEqual(["heavy", "light", "light"]);
    await Promise.all(lightLeases.map((lease) => lease.release()));
  });

  it("a heavy waiter gets in while two processes keep a stream of light holders going", async () => {
    const key = uniqueKey("sem-starve");
    const lightLockers = [semaphore({ limit: 4 }), semaphore({ limit: 4 })];
    let stop = false;
    const loops = lightLockers.flatMap((locker) =>
      [1, 2, 3].map(async () => {
        while (!stop) {
          const lease = await locker.acquire(undefined, key);
          await sleep(20 + Math.random() * 20);
          await lease.release();
        }
      }),
    );
    await sleep(200);
    const started = performance.now();
    const heavy = await semaphore({ limit: 4 }).acquire(AbortSignal.timeout(5_000), key, { weight: 4 });
    const waited = performance.now() - started;
    stop = true;
    await heavy.release();
    await Promise.all(loops);
    // Strict FIFO: it waits for the holders ahead of it, not for a gap in the stream.
    expect(waited).toBeLessThan(5_000);
  });

  it("a contended holder's release hands its permits on in one round trip; an uncontended one is a lone ZREM", async () => {
    const key = uniqueKey("sem-contended");
    const queue = `{${SEMAPHORE_PREFIX}${key}}:queue`;
    const admin = client();
    const log = await commandLog(admin, `${SEMAPHORE_PREFIX}${key}`);
    const [a, b] = [semaphore({ limit: 1 }), semaphore({ limit: 1 })];

    // Nobody waits: the lone ZREM.
    const alone = await a.acquire(undefined, key);
    expect(await log.zremsDuring(() => alone.release())).toBe(1);

    // Granted from the queue: the release is one script call, and the next waiter gets in.
    const first = await a.acquire(undefined, key);
    const granted = b.acquire(undefined, key);
    await eventually(async () => (await admin.zcard(queue)) === 1);
    const behind = a.acquire(undefined, key); // a caller of the first holder's own locker
    await eventually(async () => (await admin.zcard(queue)) === 2);
    // Callers of its own locker wait for the key: contended, though it took the key alone.
    expect(
      await log.zremsDuring(async () => {
        await first.release();
        await granted;
      }),
    ).toBe(0);
    const second = await granted;
    expect(
      await log.zremsDuring(async () => {
        await second.release();
        await behind;
      }),
    ).toBe(0);
    expect(log.scriptCalls).toBeGreaterThan(0);
    await (await behind).release();
    log.stop();
    expect(await keysOf(admin, SEMAPHORE_PREFIX, key)).toEqual([]);
  });

  it("after a release here handed the key on, the next one is one round trip too, until a release hands it to nobody", async () => {
    const key = uniqueKey("sem-hands-on");
    const queue = `{${SEMAPHORE_PREFIX}${key}}:queue`;
    const admin = client();
    const log = await commandLog(admin, `${SEMAPHORE_PREFIX}${key}`);
    // b stands for another process: a's locker never sees its waiters. Its safety-net poll (and
    // the linger of its grant channel) outlasts the test, so it gets the key only by a grant.
    const [a, b] = [semaphore({ limit: 1 }), semaphore({ limit: 1, backoff: { min: 20_000, max: 20_000 } })];
    // b's first wait subscribes to its grant channel, then tries once more: that try may take the
    // key between a's ZREM and its grant, and a's release would then hand it to nobody. So b
    // waits once on another key first; its channel stays subscribed for the rounds below.
    const warmKey = uniqueKey("sem-hands-on-warm");
    const warmHeld = await a.acquire(undefined, warmKey);
    const warmWait = b.acquire(undefined, warmKey);
    await eventually(async () => (await admin.zcard(`{${SEMAPHORE_PREFIX}${warmKey}}:queue`)) === 1);
    await warmHeld.release();
    await (await warmWait).release();
    /** a holds, b queues behind it, a releases: the ZREMs of a's release and b's grant. */
    const handOn = async (): Promise<number> => {
      const held = await a.acquire(undefined, key);
      const waiting = b.acquire(undefined, key);
      await eventually(async () => (await admin.zcard(queue)) === 1);
      let next: Lease | undefined;
      const zrems = await log.zremsDuring(async () => {
        await held.release();
        next = await waiting;
      });
      await next?.release();
      return zrems;
    };
    // a took the key alone and nothing here waited: the lone ZREM, then the grant script.
    expect(await handOn()).toBe(1);
    // Its latest release handed the key on: the next one is one script.
    expect(await handOn()).toBe(0);
    // Still expected contended: one script, which finds nobody and ends the expectation...
    const quiet = await a.acquire(undefined, key);
    expect(await log.zremsDuring(() => quiet.release())).toBe(0);
    // ...so the next uncontended release is the lone ZREM again.
    const alone = await a.acquire(undefined, key);
    expect(await log.zremsDuring(() => alone.release())).toBe(1);
    log.stop();
    expect(await keysOf(admin, SEMAPHORE_PREFIX, key)).toEqual([]);
  });

  it("abort while queued leaves no queue entry in Redis and frees nobody's permits", async () => {
    const admin = client();
    const key = uniqueKey("sem-abort");
    const [a, b] = [semaphore({ limit: 2 }), semaphore({ limit: 2 })];
    const holder = await a.acquire(undefined, key, { weight: 2 });
    const controller = new AbortController();
    const waiting = b.acquire(controller.signal, key);
    const queue = `{${SEMAPHORE_PREFIX}${key}}:queue`;
    await eventually(async () => (await admin.zcard(queue)) === 1);
    controller.abort(new Error("gave up"));
    await expect(waiting).rejects.toThrow("gave up");
    await eventually(async () => (await keysOf(admin, SEMAPHORE_PREFIX, key)).length === 1);
    expect(await admin.zcard(`${SEMAPHORE_PREFIX}${key}`)).toBe(1);
    await holder.release();
    expect(await keysOf(admin, SEMAPHORE_PREFIX, key)).toEqual([]);
  });

  it("extends held permits past their expiry; a lease with autoExtend: false expires quietly on time", async () => {
    const key = uniqueKey("sem-extend");
    const lost: LockLostError[] = [];
    const s = semaphore({ limit: 2, expiry: 400, onLockLost: (error) => lost.push(error) });
    const other = semaphore({ limit: 2 });
    const kept = await s.acquire(undefined, key);
    const once = await s.acquire(undefined, key, { autoExtend: false });
    await sleep(1_000);
    kept.assertHeld();
    expect(once.lost.aborted).toBe(true);
    expect(once.lost.reason).toMatchObject({ reason: "expired" });
    expect(lost).toEqual([]); // an expiry asked for is not reported as a loss
    expect(s.leaseStats.extensions).toBeGreaterThan(0);
    expect(await once.releaseWithOutcome()).toBe("expired");
    const second = await other.tryAcquire(undefined, key);
    expect(second).toBeDefined();
    expect(await other.tryAcquire(undefined, key)).toBeUndefined();
    await Promise.all([kept.release(), second?.release()]);
  });

  // The holder process imports the build (npm test builds before it runs the tests).
  it("gives a SIGKILLed holder's permits back after its expiry", async () => {
    const key = uniqueKey("sem-kill");
    const port = servers[0]?.port;
    const script = `
      const { Redis } = await import("ioredis");
      const { RedisSemaphore } = await import(${JSON.stringify(fileURLToPath(new URL("../../dist/esm/index.js", import.meta.url)))});
      const semaphore = new RedisSemaphore(new Redis(${port}, "127.0.0.1"), { limit: 3, expiry: 1000 });
      await semaphore.acquire(undefined, ${JSON.stringify(key)}, { weight: 3 });
      process.stdout.write("held\\n");
      setInterval(() => undefined, 1000);
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (data: Buffer) => {
          if (data.toString().includes("held")) resolve();
        });
        child.on("exit", (code) => reject(new Error(`holder exited early (${code})`)));
      });
      const s = semaphore({ limit: 3, backoff: { min: 50, max: 200 } });
      expect(await s.tryAcquire(undefined, key)).toBeUndefined();
      const killedAt = performance.now();
      child.kill("SIGKILL");
      const lease: Lease = await s.acquire(AbortSignal.timeout(5_000), key, { weight: 3 });
      const waited = performance.now() - killedAt;
      expect(waited).toBeLessThan(1_000 + 1_000);
      await lease.release();
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe("RedisReadWriteLocker on one node", () => {
  it("fences write leases, refuses fencing on read leases, and leaves no keys behind", async () => {
    const admin = client();
    const key = uniqueKey("rw");
    const [x, y] = [readWrite(), readWrite()];
    await expect(x.read.acquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
    await expect(x.write.acquire(undefined, key, { weight: 2 })).rejects.toBeInstanceOf(InvalidArgumentError);
    const w1 = await x.write.acquire(undefined, key, { fencing: true });
    const w2Promise = y.write.acquire(undefined, key, { fencing: true });
    await w1.release();
    const w2 = await w2Promise;
    expect(w2.fencingToken).toBeGreaterThan(w1.fencingToken ?? 0n);
    await w2.release();
    const readers = await Promise.all([x.read.acquire(undefined, key), y.read.acquire(undefined, key)]);
    expect(await y.write.tryAcquire(undefined, key)).toBeUndefined();
    await Promise.all(readers.map((lease) => lease.release()));
    expect((await keysOf(admin, READ_WRITE_PREFIX, key)).filter((name) => !name.endsWith(":fence"))).toEqual([]);
  });
});
