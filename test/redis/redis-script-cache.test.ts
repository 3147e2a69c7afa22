/**
 * A flushed script cache (every Redis restart, failover or SCRIPT FLUSH) must not reorder commands:
 * an EVALSHA that meets NOSCRIPT is retried as EVAL, and commands sent in between overtake it.
 * Commands whose order matters are sent with the script body, and clean-ups of an attempt wait for
 * it to settle. Each case flushes the cache, then warms exactly the scripts that let a later
 * command overtake an earlier one.
 */

import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisLocker, StoreUnavailableError } from "../../src/index.js";
import { ACQUIRE, LEAVE_QUEUE, REDLOCK_RELEASE_SCRIPT, RELEASE } from "../../src/redis/scripts.js";
import { TcpProxy } from "../../support/tcp-proxy.mjs";
import { uniqueKey } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

let fixture: RedisFixture;
let admin: Redis;
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
  admin = fixture.admin();
});
afterAll(async () => {
  await fixture?.stop();
});

describe("after SCRIPT FLUSH", () => {
  it("an aborted waiter's leave-queue is not overtaken by its locker's release (no reservation for a waiter that left)", async () => {
    for (let round = 0; round < 5; round++) {
      const key = uniqueKey("flush-leave");
      // A short safety net: a waiter behind its own locker's holder enters the queue when it polls.
      const locker = fixture.locker({ expiry: 5000, backoff: { min: 20, max: 100 } });
      const third = fixture.locker({ expiry: 5000 });
      const release = await locker.lock(undefined, key);
      const controller = new AbortController();
      const waiting = locker.lock(controller.signal, key).catch((e: unknown) => e);
      // The waiter is in the key's cross-process queue once its first attempt has run.
      await eventually(async () => (await admin.zcard(`{globallock:${key}}:queue`)) === 1);
      await admin.script("FLUSH");
      // Warm the acquire and release scripts (the cache is per server), not the leave-queue one.
      await admin.eval(ACQUIRE.source, 3, "{w}:lock", "{w}:queue", "{w}:alive", "t", 1000, "", "", "keep", 1000);
      await admin.eval(RELEASE.source, 1, "{w}:lock", "t", 0);
      controller.abort();
      expect(await waiting).toBe(controller.signal.reason); // its leave-queue has been sent
      await release(); // sent right after the leave-queue, on the same connection
      // A poll of the waiter may have been in flight at the abort: then its clean-up (sent once the
      // poll settled) frees a grant the release made to it. close() waits for that clean-up.
      await locker.close();
      // Nobody waits any more, so the key must be free: not reserved for the departed waiter.
      expect(await admin.get(`globallock:${key}`)).toBeNull();
      const [ok, releaseThird] = await third.tryLock(undefined, key);
      expect(ok).toBe(true);
      await releaseThird();
      expect(await admin.zcard(`{globallock:${key}}:queue`)).toBe(0);
    }
  });

  it("an attempt aborted in flight is cleaned up after it ran, even when it was retried as EVAL", async () => {
    for (let round = 0; round < 5; round++) {
      const key = uniqueKey("flush-abort");
      const holder = fixture.locker({ expiry: 5000 });
      const waiterLocker = fixture.locker({ expiry: 5000 });
      const release = await holder.lock(undefined, key);
      await admin.script("FLUSH"); // the waiter's first attempt meets NOSCRIPT and is re-sent
      // Only the leave-queue script is cached: a leave sent at once would overtake the attempt.
      await admin.eval(LEAVE_QUEUE.source, 3, "{warm}", "{warm}:queue", "{warm}:waiters", "nobody", "", 100);
      const controller = new AbortController();
      const waiting = waiterLocker.lock(controller.signal, key).catch((e: unknown) => e);
      controller.abort(); // while the attempt is in flight
      expect(await waiting).toBe(controller.signal.reason);
      // close() waits for the locker's in-flight commands, the clean-up included. The attempt
      // joined the queue when it finally ran; the clean-up must have run after it.
      await waiterLocker.close();
      expect(await admin.zcard(`{globallock:${key}}:queue`)).toBe(0);
      await release();
      expect(await admin.get(`globallock:${key}`)).toBeNull(); // not reserved for the leaver
    }
  });

  it("the clean-up behind an acquisition that timed out on a frozen node runs even though its script is not cached", async () => {
    const key = uniqueKey("flush-frozen");
    const locker = fixture.locker({ expiry: 4000, operationTimeout: 300 });
    const other = fixture.locker({ expiry: 4000 });
    await admin.script("FLUSH");
    // Warm only the acquire script: a failed tryLock on a held key runs it and nothing else.
    const held = uniqueKey("held");
    await admin.set(`globallock:${held}`, "someone-else", "PX", 60_000);
    expect((await locker.tryLock(undefined, held))[0]).toBe(false);
    const server = fixture.servers[0];
    server?.pause();
    try {
      await expect(locker.tryLock(undefined, key)).rejects.toBeInstanceOf(StoreUnavailableError);
      await sleep(500); // the clean-up queued behind it times out here too, before any reply
    } finally {
      server?.resume();
    }
    // The late attempt ran after SIGCONT; the clean-up right behind it deleted its key.
    await eventually(async () => (await admin.exists(`globallock:${key}`)) === 0, 1000);
    const [ok, release] = await other.tryLock(undefined, key);
    expect(ok).toBe(true);
    await release();
    await admin.del(`globallock:${held}`);
  });

  it("on a quorum, a failed attempt's clean-up cannot overtake the attempt on a node whose cache was emptied", async () => {
    // Found by the torture suite (quorum-restore): redlock re-sends a NOSCRIPT attempt as EVAL only
    // when that reply arrives; its clean-up, already queued behind, then ran first and the attempt
    // left a key nobody owns on that node for a whole expiry.
    const quorum = await RedisFixture.start(3);
    const third = quorum.servers[2];
    if (third === undefined) throw new Error("no server");
    const proxy = await TcpProxy.start(third.port, { latencyMs: 20 });
    const viaProxy = new Redis({
      host: "127.0.0.1",
      port: proxy.port,
      maxRetriesPerRequest: 1,
      retryStrategy: () => 50,
    });
    viaProxy.on("error", () => undefined);
    try {
      // The holder's clients are connected first: on a loaded machine a vote still queued behind a
      // connection can time out, and the holder win with the other two nodes.
      const holderClients = quorum.connect();
      await Promise.all(holderClients.map((client) => client.ping()));
      const holder = new RedisLocker(holderClients, { expiry: 3000 });
      quorum.lockers.push(holder);
      const [first, second] = quorum.connect();
      const contender = new RedisLocker([first as Redis, second as Redis, viaProxy], { expiry: 3000 });
      const admin = quorum.admin(2);
      const key = uniqueKey("quorum-flush");
      const lease = await holder.acquire(undefined, key);
      // The case needs the holder on nodes 0 and 1 (a late vote's write still lands: wait for it).
      const [node0, node1] = [quorum.admin(0), quorum.admin(1)];
      await eventually(async () => {
        const [on0, on1] = await Promise.all([node0.get(`globallock:${key}`), node1.get(`globallock:${key}`)]);
        return on0 !== null && on0 === on1;
      });
      // Node 2 as after a restart: no key, and only the clean-up's script cached.
      await admin.del(`globallock:${key}`);
      await admin.script("FLUSH");
      await admin.eval(REDLOCK_RELEASE_SCRIPT, 1, "{warm-up}", "nobody");
      expect((await contender.tryLock(undefined, key))[0]).toBe(false);
      await sleep(200); // the attempt's EVAL, if it was retried, has long arrived
      // No key nobody owns: gone, or (on a slow machine, once the holder's extension came due)
      // the holder's own token, restored there by that extension — never the contender's.
      const holderToken = await node0.get(`globallock:${key}`);
      expect([null, holderToken]).toContain(await admin.get(`globallock:${key}`));
      await contender.close();
      await lease.release();
    } finally {
      viaProxy.disconnect();
      await proxy.close();
      await quorum.stop();
    }
  });
});
