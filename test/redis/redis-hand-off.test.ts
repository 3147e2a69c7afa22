/** The cross-process grant queue of a single node: FIFO between lockers, one wake-up per release. */

import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisLocker } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, sleep, untilWaiting } from "../helpers/wait.js";

let fixture: RedisFixture;
let admin: Redis;
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
  admin = fixture.admin();
});
afterAll(async () => {
  await fixture?.stop();
});

/** Sum of all `calls=` in INFO commandstats for the given commands. */
async function calls(commands: string[]): Promise<number> {
  const info = await fixture.admin().info("commandstats");
  let total = 0;
  for (const line of info.split("\n")) {
    const match = /^cmdstat_([a-z|]+):calls=(\d+)/.exec(line.trim());
    if (match && commands.includes(match[1] as string)) total += Number(match[2]);
  }
  return total;
}

/**
 * Waits until `count` lockers are registered in `key`'s grant queue (its liveness hash in Redis):
 * their attempt that joined the queue has run. (`waitingCount` alone counts a waiter from its
 * first failed try on, which can come before the try that joins.)
 */
async function untilQueued(key: string, count: number): Promise<void> {
  await eventually(async () => (await admin.hlen(`{globallock:${key}}:waiters`)) === count, 20_000);
}

/**
 * Each locker in turn calls `lock` on `key` and is observably queued (it tried, failed, joined the
 * grant queue and waits) before the next one calls: the arrival order, whatever the machine's
 * load. Each pushes its index to `order` once it holds the key, then releases. Resolves to the calls.
 */
async function queueInTurn(lockers: RedisLocker[], key: string, order: number[]): Promise<Array<Promise<void>>> {
  const calls: Array<Promise<void>> = [];
  for (const [i, locker] of lockers.entries()) {
    calls.push(
      locker.lock(AbortSignal.timeout(20_000), key).then(async (release) => {
        order.push(i);
        await sleep(2);
        await release();
      }),
    );
    await untilWaiting(locker, 1);
    await untilQueued(key, i + 1);
  }
  return calls;
}

describe("grant queue across lockers (separate connections, as separate processes)", () => {
  it("serves lockers in arrival order", async () => {
    const key = uniqueKey();
    const holder = fixture.locker();
    const lockers = [0, 1, 2, 3].map(() => fixture.locker());
    const release = await holder.lock(undefined, key);
    const order: number[] = [];
    const waits = await queueInTurn(lockers, key, order);
    await release();
    await Promise.all(waits);
    expect(order).toEqual([0, 1, 2, 3]);
  });

  it("wakes only the next waiter: no failed attempts while many lockers wait", async () => {
    const key = uniqueKey();
    // No safety-net poll and no extension sweep while the test runs, however slow the machine:
    // every script call counted below is a hand-off's.
    const quiet = { expiry: 60_000, backoff: { min: 30_000, max: 30_000 } };
    const lockers = Array.from({ length: 6 }, () => fixture.locker(quiet));
    const holder = lockers[0] as RedisLocker;
    const release = await holder.lock(undefined, key);
    const done: Promise<void>[] = [];
    for (const locker of lockers.slice(1)) {
      done.push(
        (async () => {
          const r = await locker.lock(AbortSignal.timeout(20_000), key);
          await sleep(2);
          await r();
        })(),
      );
      await untilWaiting(locker, 1); // it has tried once and is queued
    }
    await untilQueued(key, lockers.length - 1);
    const before = await calls(["evalsha", "eval"]);
    await release();
    await Promise.all(done);
    const after = await calls(["evalsha", "eval"]);
    // 5 hand-offs, each a direct grant: the grantee sends no acquire, only its first extension
    // (which lengthens the grant's short TTL) and its release (+1 for the first release).
    expect(after - before).toBe(1 + 5 * 2);
  });

  it("tells each grant to the grantee alone: one message per hand-off, on the grantee locker's own channel", async () => {
    const key = uniqueKey();
    const listener = fixture.admin().duplicate();
    const heard: Array<[channel: string, message: string]> = [];
    listener.on("pmessage", (_pattern: string, channel: string, message: string) => heard.push([channel, message]));
    await listener.psubscribe("globallock:*");
    try {
      const lockers = Array.from({ length: 6 }, () => fixture.locker());
      const release = await (lockers[0] as RedisLocker).lock(undefined, key);
      const order: number[] = [];
      const done = await queueInTurn(lockers.slice(1), key, order);
      await release();
      await Promise.all(done);
      expect(order).toEqual([0, 1, 2, 3, 4]);
      // Five hand-offs, five messages (the last release found nobody queued and told nobody),
      // each on a different grant channel — nothing on the key's channel, which every waiter
      // would hear. Every grantee was woken by its message, so all five were sent; a sixth would
      // have been published before the last release resolved, so it would be here by the time an
      // admin round trip comes back.
      await eventually(() => heard.length >= 5);
      await fixture.admin().ping();
      const channels = heard.map(([channel]) => channel);
      expect(channels).toHaveLength(5);
      for (const channel of channels) expect(channel).toMatch(/^globallock:grant:[0-9a-f]{16}$/);
      expect(new Set(channels).size).toBe(5);
      for (const [, message] of heard) expect(message.endsWith(`:globallock:${key}`)).toBe(true);
    } finally {
      listener.disconnect();
    }
  });

  it("stamps each grant with the server's time of the grant, in whole ms (the grantee dates its lease from it)", async () => {
    const key = uniqueKey();
    const listener = fixture.admin().duplicate();
    const stamps: number[] = [];
    listener.on("pmessage", (_pattern: string, _channel: string, message: string) => {
      stamps.push(Number(message.split(":")[3]));
    });
    await listener.psubscribe("globallock:grant:*");
    /** The server's clock in whole ms, as TIME gives it. */
    const serverMs = async (): Promise<number> => {
      const [seconds, micros] = await admin.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    try {
      const [holder, waiter] = [fixture.locker(), fixture.locker()];
      // Until a grant falls in the first 90 ms of a second (its microseconds have fewer than six
      // digits), spaced so that grants move through the second.
      let early = 0;
      for (let i = 0; early < 2 && i < 300; i++) {
        const release = await holder.lock(undefined, key);
        const waiting = waiter.lock(AbortSignal.timeout(10_000), key);
        await untilQueued(key, 1);
        const before = await serverMs();
        await release();
        await (await waiting)();
        const after = await serverMs();
        await eventually(() => stamps.length === i + 1);
        const stamp = stamps[i] as number;
        expect(stamp).toBeGreaterThanOrEqual(before);
        expect(stamp).toBeLessThanOrEqual(after);
        if (before % 1000 < 90) early += 1;
        await sleep(7 + Math.random() * 20);
      }
      expect(early).toBe(2);
    } finally {
      listener.disconnect();
    }
  });

  it("hands over by direct grant: the release sets the next waiter's token, which takes no claim round trip", async () => {
    const key = uniqueKey();
    const holder = fixture.locker();
    const waiter = fixture.locker();
    const other = fixture.locker();
    const release = await holder.lock(undefined, key);
    const waiting = waiter.acquire(AbortSignal.timeout(10_000), key);
    await untilQueued(key, 1); // the waiter tried and registered its token in the queue
    const setsBefore = await calls(["set"]);
    const acquiresBefore = await calls(["evalsha", "eval"]);
    await release();
    const lease = await waiting;
    // One SET: the grant inside the release. No SET NX of a claiming attempt.
    expect((await calls(["set"])) - setsBefore).toBe(1);
    // The release, and at most the grantee's first extension (due at once: the grant's TTL is short).
    expect((await calls(["evalsha", "eval"])) - acquiresBefore).toBeLessThanOrEqual(2);
    expect((await other.tryLock(undefined, key))[0]).toBe(false);
    await sleep(400); // past the grant's TTL (the hand-off grace): the first extension kept it
    expect(lease.lost.aborted).toBe(false);
    expect((await other.tryLock(undefined, key))[0]).toBe(false);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("recovers a grant whose message was lost: the waiter's next attempt finds its own token and takes the key", async () => {
    const key = uniqueKey();
    const holder = fixture.locker();
    const waiter = fixture.locker({ backoff: { min: 50, max: 300 } });
    const other = fixture.locker();
    const release = await holder.lock(undefined, key);
    const waiting = waiter.lock(AbortSignal.timeout(10_000), key);
    await untilQueued(key, 1);
    // Drop every subscriber connection: the grant's message reaches nobody.
    await admin.call("CLIENT", "KILL", "TYPE", "pubsub");
    await release();
    const releaseWaiter = await waiting; // at its next attempt (after resubscribing, or its poll)
    expect((await other.tryLock(undefined, key))[0]).toBe(false);
    await releaseWaiter();
    expect((await other.tryLock(undefined, key))[0]).toBe(true);
  });

  it("does not starve a process: two lockers × two tasks looping on one key all get a fair share", {
    timeout: 20_000,
  }, async () => {
    // Found by the torture suite: a waiter postponed by every grant to another locker never tried
    // again, so its place in the grant queue went stale and was dropped; and a call behind its
    // own locker's holder joined the queue only at its first poll.
    const key = uniqueKey();
    const lockers = [0, 1].map(() => fixture.locker({ expiry: 1000, backoff: { min: 20, max: 250 } }));
    const counts = [0, 0, 0, 0];
    let timedOut = 0;
    let stop = false;
    const task = async (locker: RedisLocker, index: number): Promise<void> => {
      while (!stop) {
        let release: (() => Promise<void>) | undefined;
        try {
          release = await locker.lock(AbortSignal.timeout(3000), key);
        } catch {
          timedOut += 1;
          continue;
        }
        counts[index] = (counts[index] ?? 0) + 1;
        await sleep(1);
        await release();
      }
    };
    const tasks = [task(lockers[0] as RedisLocker, 0), task(lockers[0] as RedisLocker, 1)];
    await sleep(100);
    tasks.push(task(lockers[1] as RedisLocker, 2), task(lockers[1] as RedisLocker, 3));
    await sleep(6000);
    stop = true;
    await Promise.all(tasks);
    expect(timedOut).toBe(0);
    const fewest = Math.min(...counts);
    const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
    expect(fewest).toBeGreaterThan(mean / 2);
  });

  it("does not let a vanished waiter stall the key: its grant lapses after the grace and it is dropped", async () => {
    const key = uniqueKey();
    const holder = fixture.locker({ backoff: { min: 50, max: 300 } });
    const release = await holder.lock(undefined, key);
    // A locker whose process "dies" while queued: its connection drops without close().
    const doomedClient = fixture.servers[0]?.client();
    if (doomedClient === undefined) throw new Error("no server");
    const doomed = new RedisLocker(doomedClient, { backoff: { min: 50, max: 300 } });
    const doomedWait = doomed.lock(undefined, key).catch(() => undefined);
    await untilQueued(key, 1);
    const survivor = fixture.locker({ backoff: { min: 50, max: 300 } });
    const survivorWait = survivor.lock(AbortSignal.timeout(10_000), key);
    await untilQueued(key, 2);
    doomedClient.disconnect(); // the doomed locker can no longer claim a hand-off
    await release(); // grants the key to the doomed locker, first in line (TTL: the grace)
    const releaseSurvivor = await survivorWait; // after the grant lapses, at its next poll
    await releaseSurvivor();
    await eventually(async () => (await admin.keys(`*${key}*`)).length === 0, 5000);
    await doomed.close();
    await doomedWait;
  });
});

describe("the waiters' mark: a release looks at the queue only when someone joined it", () => {
  /** No poll and no extension while a test looks: a waiter gets the key only by a grant. */
  const quiet = { expiry: 60_000, backoff: { min: 30_000, max: 30_000 } };
  const stored = (key: string): Promise<string | null> => admin.get(`globallock:${key}`);

  it("is set by a waiter that joins; the release still hands the key over directly, marked while others wait", async () => {
    const key = uniqueKey();
    const holder = fixture.locker(quiet);
    const first = fixture.locker(quiet);
    const second = fixture.locker(quiet);
    const release = await holder.lock(undefined, key);
    const token = await stored(key);
    expect(token).toMatch(/^[^+]+$/);
    const firstWait = first.lock(AbortSignal.timeout(20_000), key);
    await untilQueued(key, 1);
    expect(await stored(key)).toBe(`${token}+`); // APPENDed once, TTL kept
    expect(await admin.pttl(`globallock:${key}`)).toBeGreaterThan(50_000);
    const secondWait = second.lock(AbortSignal.timeout(20_000), key);
    await untilQueued(key, 2);
    expect(await stored(key)).toBe(`${token}+`); // still one mark
    await release();
    // No poll for 30 s: only the release's grant can have given it the key.
    const releaseFirst = await firstWait;
    expect(await stored(key)).toMatch(/^[^+]+\+$/); // granted marked: the second still waits
    await releaseFirst();
    const releaseSecond = await secondWait;
    const last = await stored(key);
    expect(last).toMatch(/^[^+]+$/); // granted unmarked: nobody else queued
    const scansBefore = await calls(["zrange"]);
    await releaseSecond();
    expect(await calls(["zrange"])).toBe(scansBefore); // the last release did not look
    expect(await stored(key)).toBeNull();
  });

  it("is kept by an extension and an adoption: the adopter's release hands the key to the waiter", async () => {
    const key = uniqueKey();
    const holder = fixture.locker(quiet);
    const adopter = fixture.locker(quiet);
    const waiter = fixture.locker(quiet);
    const lease = await holder.acquire(undefined, key);
    const waiting = waiter.lock(AbortSignal.timeout(20_000), key);
    await untilQueued(key, 1);
    const handle = await lease.handOff(); // extends once: the marked token is still the holder's
    const adopted = await adopter.adopt(undefined, handle);
    expect(await stored(key)).toMatch(/^[^+]+\+$/);
    expect(await adopted.releaseWithOutcome()).toBe("released");
    const releaseWaiter = await waiting;
    await releaseWaiter();
    expect(await stored(key)).toBeNull();
  });

  it("left stale by a waiter that gave up costs one look at the queue: the release finds nobody and deletes the key", async () => {
    const key = uniqueKey();
    const holder = fixture.locker(quiet);
    const waiter = fixture.locker(quiet);
    const release = await holder.lock(undefined, key);
    const giveUp = new AbortController();
    const waiting = waiter.lock(giveUp.signal, key).catch((error: unknown) => error);
    await untilQueued(key, 1);
    giveUp.abort();
    await waiting;
    await eventually(async () => (await admin.hlen(`{globallock:${key}}:waiters`)) === 0, 20_000);
    expect(await stored(key)).toMatch(/\+$/); // the mark stays
    const scansBefore = await calls(["zrange"]);
    await release();
    expect((await calls(["zrange"])) - scansBefore).toBe(1);
    expect(await stored(key)).toBeNull();
    expect((await waiter.tryLock(undefined, key))[0]).toBe(true);
  });
});
