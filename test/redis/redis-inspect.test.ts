/**
 * `inspect` on one Redis node (#19), seen from another locker on its own connection (another
 * process, as far as Redis can tell): holders with their owner, weight and time left, and the
 * lockers queued, for a lock, a semaphore and a read-write lock; it changes nothing; and the
 * owner costs the uncontended path nothing (the same commands, the owner inside the value).
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Lease,
  type Locker,
  RedisLocker,
  type RedisLockerOptions,
  RedisReadWriteLocker,
  RedisSemaphore,
} from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { nodeRedisClient } from "../helpers/node-redis.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

/** No retries while a test looks: a waiter registers once and then only waits to be woken. */
const WAKE_ONLY: RedisLockerOptions = { backoff: { min: 20_000, max: 20_000 } };

let fixture: RedisFixture;
let admin: Redis;
const closables: Array<{ close(): Promise<void> }> = [];
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
  admin = fixture.admin();
});
afterAll(async () => {
  await Promise.allSettled(closables.map((closable) => closable.close()));
  await fixture?.stop();
});

function semaphore(owner: string, options: RedisLockerOptions = {}): RedisSemaphore {
  const made = new RedisSemaphore(fixture.connect()[0] as Redis, { limit: 3, owner, ...options });
  closables.push(made);
  return made;
}

function readWrite(owner: string, options: RedisLockerOptions = {}): RedisReadWriteLocker {
  const made = new RedisReadWriteLocker(fixture.connect()[0] as Redis, { owner, ...options });
  closables.push(made.read);
  return made;
}

/** Waits until `count` waiters of `key` (under `prefix`) are registered in its queue in Redis. */
async function untilQueued(prefix: string, key: string, count: number): Promise<void> {
  await eventually(async () => (await admin.hlen(`{${prefix}${key}}:waiters`)) === count, 20_000);
}

/** Holders by owner, with what this test compares (time left is checked apart). */
async function holdersOf(locker: Locker, key: string): Promise<Array<[string, string, number]>> {
  const { holders } = await locker.inspect(undefined, key);
  for (const holder of holders) {
    expect(holder.expiresInMs).toBeGreaterThan(0);
    expect(holder.expiresInMs).toBeLessThanOrEqual(30_000);
    // One fencing counter per key: a holder's own token is not kept.
    expect(holder.fencingToken).toBeUndefined();
  }
  return holders.map((h) => [h.owner, h.mode, h.weight] as [string, string, number]).sort();
}

describe("inspect across lockers", () => {
  it("a lock: its holder's owner and time left, and the lockers queued (read through node-redis too)", async () => {
    const key = uniqueKey();
    const alpha = fixture.locker({ owner: "alpha", expiry: 5000 });
    const beta = fixture.locker({ owner: "beta", ...WAKE_ONLY });
    const client = await nodeRedisClient(fixture.servers[0] as (typeof fixture.servers)[0]);
    const viewer = new RedisLocker(client, { owner: "viewer" });
    closables.push(viewer);
    const lease = await alpha.acquire(undefined, key, { fencing: true });
    expect(await viewer.inspect(undefined, key)).toEqual({
      key,
      holders: [{ owner: "alpha", mode: "exclusive", weight: 1, expiresInMs: expect.any(Number) }],
      waiting: 0,
    });
    const [holder] = (await viewer.inspect(undefined, key)).holders;
    expect(holder?.expiresInMs).toBeGreaterThan(0);
    expect(holder?.expiresInMs).toBeLessThanOrEqual(5000);
    const waiting = beta.acquire(AbortSignal.timeout(20_000), key);
    await untilQueued("globallock:", key, 1);
    expect((await viewer.inspect(undefined, key)).waiting).toBe(1);
    await lease.release();
    const next = await waiting;
    expect(await viewer.inspect(undefined, key)).toMatchObject({ holders: [{ owner: "beta" }], waiting: 0 });
    await next.release();
    expect(await viewer.inspect(undefined, key)).toEqual({ key, holders: [], waiting: 0 });
    await viewer.close();
    client.destroy();
  });

  it("a semaphore: every holder with its weight; each waiting call queued", async () => {
    const key = uniqueKey();
    const leases: Lease[] = [
      await semaphore("alpha").acquire(undefined, key, { weight: 2 }),
      await semaphore("beta").acquire(undefined, key),
    ];
    const gamma = semaphore("gamma", WAKE_ONLY);
    const waits = [gamma.acquire(AbortSignal.timeout(20_000), key), gamma.acquire(AbortSignal.timeout(20_000), key)];
    await untilQueued("globallock:semaphore:", key, 2);
    const viewer = semaphore("viewer");
    expect(await holdersOf(viewer, key)).toEqual([
      ["alpha", "shared", 2],
      ["beta", "shared", 1],
    ]);
    expect((await viewer.inspect(undefined, key)).waiting).toBe(2);
    await Promise.all(leases.map((lease) => lease.release()));
    for (const lease of await Promise.all(waits)) leases.push(lease);
    expect(await holdersOf(viewer, key)).toEqual([
      ["gamma", "shared", 1],
      ["gamma", "shared", 1],
    ]);
    await Promise.all(leases.map((lease) => lease.release()));
  });

  it("a read-write lock: readers shared, a writer exclusive, the writer's wait counted", async () => {
    const key = uniqueKey();
    const readers = [
      await readWrite("alpha").read.acquire(undefined, key),
      await readWrite("beta").read.acquire(undefined, key),
    ];
    const writing = readWrite("gamma", WAKE_ONLY).write.acquire(AbortSignal.timeout(20_000), key);
    await untilQueued("globallock:rw:", key, 1);
    const viewer = readWrite("viewer");
    expect(await holdersOf(viewer.read, key)).toEqual([
      ["alpha", "shared", 1],
      ["beta", "shared", 1],
    ]);
    expect((await viewer.write.inspect(undefined, key)).waiting).toBe(1);
    await Promise.all(readers.map((lease) => lease.release()));
    const writer = await writing;
    expect(await holdersOf(viewer.write, key)).toEqual([["gamma", "exclusive", 1]]);
    await writer.release();
  });
});

describe("inspect reads only", () => {
  it("changes no key, value, TTL or member (an expired permit is skipped, not dropped)", async () => {
    // A server of its own: nothing else writes to it while the test compares.
    const own = await RedisFixture.start(1);
    try {
      const view = own.admin();
      const client = (): Redis => own.connect()[0] as Redis;
      const lock = new RedisLocker(client(), { owner: "alpha", ...WAKE_ONLY });
      const waiter = new RedisLocker(client(), { owner: "beta", ...WAKE_ONLY });
      const permits = new RedisSemaphore(client(), { limit: 3, owner: "gamma", ...WAKE_ONLY });
      closables.push(lock, waiter, permits);
      await lock.acquire(undefined, "lock", { autoExtend: false, expiry: 60_000 });
      const waiting = waiter.acquire(AbortSignal.timeout(20_000), "lock").catch(() => undefined);
      await eventually(async () => (await view.hlen("{globallock:lock}:waiters")) === 1, 20_000);
      await permits.acquire(undefined, "permits", { autoExtend: false, expiry: 60_000 });
      await permits.acquire(undefined, "permits", { autoExtend: false, expiry: 200 });
      await sleep(300); // the second permit's deadline passes; its member stays in the set
      const snapshot = async (): Promise<unknown[]> => {
        const keys = (await view.keys("*")).sort();
        const rows: unknown[] = [];
        for (const key of keys) {
          rows.push([key, await view.dumpBuffer(key), await view.call("PEXPIRETIME", key)]);
        }
        const info = await view.info("persistence");
        rows.push(/rdb_changes_since_last_save:(\d+)/.exec(info)?.[1]);
        return rows;
      };
      const before = await snapshot();
      expect(await view.zcard("globallock:semaphore:permits")).toBe(2);
      expect((await lock.inspect(undefined, "lock")).holders.map((h) => h.owner)).toEqual(["alpha"]);
      expect((await lock.inspect(undefined, "lock")).waiting).toBe(1);
      const { holders } = await permits.inspect(undefined, "permits");
      expect(holders.map((h) => h.owner)).toEqual(["gamma"]);
      expect(await snapshot()).toEqual(before);
      await Promise.all([lock.close(), waiter.close(), permits.close()]);
      await waiting;
    } finally {
      await own.stop();
    }
  });
});

describe("the owner on the uncontended path", () => {
  it("adds no command: one SET NX PX (5 arguments and the value, which carries the owner), then the release, whose script runs GET and DEL only", async () => {
    const shapes: string[][] = [];
    for (const owner of ["a", "web-7d9f8b6c5-x2k4q: a much longer owner / é"]) {
      const locker = fixture.locker({ owner });
      const warm = await locker.lock(undefined, uniqueKey()); // scripts loaded, connection up
      await warm();
      const key = uniqueKey();
      const monitor = await fixture.admin().monitor();
      const seen: string[][] = [];
      /** Commands scripts ran on the key or its companions (the queue's names contain it). */
      const scripted: string[] = [];
      // Commands the locker sent, and those its scripts ran (MONITOR shows them as from "lua").
      monitor.on("monitor", (_time: string, args: string[], source: string) => {
        if (!args.some((arg) => arg.includes(key))) return;
        if (source === "lua") scripted.push(args[0]?.toLowerCase() ?? "");
        else seen.push(args);
      });
      const release = await locker.lock(undefined, key);
      await release();
      // A command after the release: once MONITOR shows it, it has shown all the release ran.
      await admin.exists(`${key}:end`);
      await eventually(() => seen.length >= 3);
      seen.pop();
      monitor.disconnect();
      // The release's script: no look at the grant queue, nothing published (nobody waits).
      expect(scripted).toEqual(["get", "del"]);
      const [set, releaseCall] = seen as [string[], string[]];
      expect(set.length).toBe(6);
      expect([set[0]?.toLowerCase(), set[1], set[3], set[4], set[5]]).toEqual([
        "set",
        `globallock:${key}`,
        "PX",
        "30000",
        "NX",
      ]);
      expect(set[2]).toMatch(new RegExp(`^${literal(encodeURIComponent(owner))}/[0-9a-f]{32}$`));
      shapes.push(
        seen.map((args) => args[0]?.toLowerCase() ?? ""),
        [String(releaseCall.length)],
      );
    }
    // The same commands, with the same number of arguments, whatever the owner.
    expect(shapes[0]).toEqual(["set", "evalsha"]);
    expect(shapes[2]).toEqual(shapes[0]);
    expect(shapes[3]).toEqual(shapes[1]);
  });
});

/** `text` as a literal in a regular expression. */
function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
