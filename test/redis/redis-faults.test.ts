/** Real faults against real redis-server processes: unreachable, killed, restarted, frozen. */
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { type LockLostError, RedisLocker, StoreUnavailableError } from "../../src/index.js";
import { ReleaseNotifier } from "../../src/redis/release-notifier.js";
import { uniqueKey } from "../contracts/contract.js";
import { freePort } from "../helpers/redis.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

const fixtures: RedisFixture[] = [];
afterEach(async () => {
  await Promise.all(fixtures.splice(0).map((f) => f.stop()));
});
async function start(nodes: number): Promise<RedisFixture> {
  const fixture = await RedisFixture.start(nodes);
  fixtures.push(fixture);
  return fixture;
}

describe("an unreachable Redis", () => {
  it("is a typed error with a cause for lock and tryLock, never a hang and never false", async () => {
    const port = await freePort(); // nothing listens here
    // Default ioredis settings: commands would queue for many seconds while it reconnects.
    const client = new Redis({ host: "127.0.0.1", port });
    client.on("error", () => undefined);
    const locker = new RedisLocker(client, { operationTimeout: 300 });
    try {
      const lockError = await locker.lock(undefined, uniqueKey()).catch((e: unknown) => e);
      expect(lockError).toBeInstanceOf(StoreUnavailableError);
      expect((lockError as StoreUnavailableError).code).toBe("ERR_GLOBALLOCK_STORE_UNAVAILABLE");
      expect((lockError as Error).cause).toBeInstanceOf(Error);
      expect((lockError as Error).message).toMatch(/did not answer within 300 ms/);
      await expect(locker.tryLock(undefined, uniqueKey())).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await locker.close();
      client.disconnect();
    }
  });

  it("fails fast with the client's own error when the client does not queue offline", async () => {
    const port = await freePort();
    const client = new Redis({ host: "127.0.0.1", port, enableOfflineQueue: false, lazyConnect: true });
    client.on("error", () => undefined);
    const locker = new RedisLocker(client);
    try {
      const error = await locker.tryLock(undefined, uniqueKey()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(String((error as Error).cause)).toMatch(/offline queue|Stream isn't writeable/i);
    } finally {
      await locker.close();
      client.disconnect();
    }
  });
});

describe("a three-node quorum", () => {
  it("still locks with one node killed, and fails with a typed error with two killed, leaving no partial keys", async () => {
    const fixture = await start(3);
    const locker = fixture.locker({ operationTimeout: 300 });
    const peer = fixture.locker({ operationTimeout: 300 });
    const live = fixture.admin(0);
    const key = uniqueKey();

    await fixture.servers[2]?.kill();
    const release = await locker.lock(AbortSignal.timeout(5000), key);
    expect((await peer.tryLock(undefined, key))[0]).toBe(false); // held, not "unavailable"
    const waiting = peer.lock(AbortSignal.timeout(5000), key); // contention with a dead node: waits
    await sleep(50);
    await release();
    const releasePeer = await waiting;
    await releasePeer();

    await fixture.servers[1]?.kill();
    const error = await locker.lock(AbortSignal.timeout(5000), key).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).cause).toBeInstanceOf(AggregateError);
    await expect(locker.tryLock(undefined, key)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await live.keys("globallock:*")).toEqual([]); // the minority grant was rolled back
  });

  it("passes a release on to a waiting locker once, not once per node that published it", async () => {
    const fixture = await start(3);
    const holder = fixture.locker();
    const key = uniqueKey();
    const channel = `${holder.options.prefix}${key}`;
    // Plain subscribers, one per node: proof that every node's publication has arrived.
    const plain = fixture.connect();
    const perNode = plain.map(() => 0);
    await Promise.all(
      plain.map(async (client, node) => {
        client.on("message", (from: string) => {
          if (from === channel) perNode[node] = (perNode[node] ?? 0) + 1;
        });
        await client.subscribe(channel);
      }),
    );
    const heard: string[] = [];
    const notifier = new ReleaseNotifier(
      fixture.connect(),
      { timeoutMs: 5000, lingerMs: 1000 },
      (from, message) => {
        if (from === channel) heard.push(message);
      },
      () => undefined,
    );
    try {
      await notifier.subscribe(channel);
      for (let i = 0; i < 2; i++) await (await holder.lock(undefined, key))();
      await eventually(() => perNode.every((count) => count === 2));
      // An empty release message (a locker of an earlier version) is passed on every time.
      const admin = fixture.admin(0);
      await admin.publish(channel, "");
      await admin.publish(channel, "");
      await eventually(() => (perNode[0] ?? 0) === 4);
      await sleep(50); // the notifier's own connections received the same publications
      expect(heard.filter((message) => message !== "")).toHaveLength(2); // one per release, not per node
      expect(new Set(heard.filter((message) => message !== "")).size).toBe(2); // each its own token
      expect(heard.filter((message) => message === "")).toHaveLength(2);
    } finally {
      await notifier.close();
    }
  });

  it("answers a release once a majority deleted the lock, without waiting for a frozen node", async () => {
    const fixture = await start(3);
    // A frozen node's command waits for the operation timeout: far beyond this test's own.
    const locker = fixture.locker({ operationTimeout: 60_000, expiry: 180_000 });
    const key = uniqueKey();
    const lease = await locker.acquire(undefined, key);
    fixture.servers[2]?.pause();
    try {
      expect(await lease.releaseWithOutcome()).toBe("released");
      expect(await fixture.admin(0).exists(`${locker.options.prefix}${key}`)).toBe(0);
    } finally {
      fixture.servers[2]?.resume();
    }
  }, 20_000);

  /**
   * Three nodes, and two other contenders' minorities on the first two (one node each, the third
   * free): every attempt splits the vote. The locker's backoff is far beyond the tests' timeouts,
   * so only a retry after a split can try again in time.
   */
  async function splitVote() {
    const fixture = await start(3);
    const locker = fixture.locker({ backoff: { min: 60_000, max: 60_000 } });
    const key = uniqueKey();
    const name = `${locker.options.prefix}${key}`;
    const [first, second, third] = [fixture.admin(0), fixture.admin(1), fixture.admin(2)];
    await first.set(name, "contender-a", "PX", 60_000);
    await second.set(name, "contender-b", "PX", 60_000);
    /** The contenders give up (no release is published: nobody held the key). */
    const giveUp = async () => {
      await first.del(name);
      await second.del(name);
    };
    return { locker, key, third, giveUp };
  }

  it("after a split vote (no token holds a majority), tries again within milliseconds, not after its backoff", async () => {
    const { locker, key, giveUp } = await splitVote();
    const locking = locker.lock(undefined, key);
    await eventually(() => locker.waitingCount === 1);
    await giveUp();
    await (await locking)();
  }, 20_000);

  it("backs off further with each split vote in a row: a split that lasts makes no storm of attempts", async () => {
    // Minorities that stay (as a crashed contender's would, until their lease runs out).
    const { locker, key, third } = await splitVote();
    const scriptCalls = async (): Promise<number> => {
      const info = await third.info("commandstats");
      return [...info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    };
    const before = await scriptCalls();
    const stop = new AbortController();
    const locking = locker.lock(stop.signal, key).catch((error: unknown) => error);
    await sleep(2000);
    const during = (await scriptCalls()) - before;
    stop.abort();
    await locking;
    // Each try costs the third node about three scripts (the attempt, its undo, the look at the
    // holders). Retried every few milliseconds for 2 s that would be hundreds of tries; doubling
    // the wait after each split, about a dozen.
    expect(during).toBeGreaterThan(6); // it did retry after the splits
    expect(during).toBeLessThan(120);
  }, 20_000);

  it("keeps a lock alive and exclusive while one node is down", async () => {
    const fixture = await start(3);
    const lost: LockLostError[] = [];
    // Expiries long enough that a loaded machine's command timeouts (expiry / 4) are not reached.
    const holder = fixture.locker({ expiry: 2000, onLockLost: (e) => lost.push(e) });
    const other = fixture.locker({ expiry: 5000 });
    const key = uniqueKey();
    const release = await holder.lock(undefined, key);
    await fixture.servers[0]?.kill();
    // Well past the holder's expiry: only its extensions (on the two live nodes) keep it.
    for (const until = performance.now() + 4500; performance.now() < until; ) {
      expect((await other.tryLock(undefined, key))[0]).toBe(false);
      await sleep(100);
    }
    expect(lost).toEqual([]);
    await release();
  });
});

describe("a Redis restart without persistence", () => {
  it("reports the lock as lost at the next extension and never re-creates the key", async () => {
    const fixture = await start(1);
    const lost: LockLostError[] = [];
    // An expiry that a restart on a loaded machine does not outlast, so the loss is the extension's
    // finding ("taken", the key is gone), not the local deadline's ("expired").
    const expiry = 3000;
    const holder = fixture.locker({ expiry, onLockLost: (e) => lost.push(e) });
    const admin = fixture.admin();
    const key = uniqueKey();
    const release = await holder.lock(undefined, key);
    await fixture.servers[0]?.restart();
    await eventually(() => lost.length === 1, 2 * expiry);
    expect(lost[0]?.reason).toBe("taken"); // told by the next extension, before the lease ran out
    await eventually(async () => (await admin.ping().catch(() => "")) === "PONG");
    await sleep(expiry * 0.6); // more sweeps would have run by now
    expect(await admin.exists(`globallock:${key}`)).toBe(0);
    const other = fixture.locker({ expiry: 600 });
    const releaseOther = await other.lock(AbortSignal.timeout(5000), key);
    await release(); // late release: must not touch the new holder's key
    expect(await admin.exists(`globallock:${key}`)).toBe(1);
    await releaseOther();
  });
});

describe("a frozen Redis (SIGSTOP)", () => {
  it("makes the holder report loss at its local deadline; after SIGCONT nothing stale touches the next holder", async () => {
    const fixture = await start(1);
    const lost: LockLostError[] = [];
    const holder = fixture.locker({ expiry: 600, onLockLost: (e) => lost.push(e) });
    const key = uniqueKey();
    const release = await holder.lock(undefined, key);
    const server = fixture.servers[0];
    server?.pause();
    try {
      await eventually(() => lost.length === 1, 3000);
      expect(lost[0]?.reason).toBe("expired");
      const stale = release(); // queued behind the freeze; must not hang
      await sleep(700);
      server?.resume();
      await stale;
    } finally {
      server?.resume();
    }
    const admin = fixture.admin();
    const next = fixture.locker({ expiry: 600 });
    const releaseNext = await next.lock(AbortSignal.timeout(5000), key);
    const token = await admin.get(`globallock:${key}`);
    await sleep(400); // let any stale extension or release from the old holder arrive
    expect(await admin.get(`globallock:${key}`)).toBe(token);
    await releaseNext();
  });
});

describe("an attempt that times out while Redis is frozen", () => {
  it("leaves no lock that nobody owns once Redis answers again", async () => {
    const fixture = await start(1);
    const locker = fixture.locker({ expiry: 2000 });
    const other = fixture.locker({ expiry: 2000 });
    const admin = fixture.admin();
    for (const l of [locker, other]) {
      const [, release] = await l.tryLock(undefined, uniqueKey()); // load the scripts
      await release();
    }
    const key = uniqueKey();
    const server = fixture.servers[0];
    server?.pause();
    try {
      await expect(locker.tryLock(undefined, key)).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      server?.resume();
    }
    // The late attempt ran after SIGCONT, and the clean-up queued behind it deleted its key.
    await eventually(async () => (await admin.exists(`globallock:${key}`)) === 0, 1000);
    const [ok, release] = await other.tryLock(undefined, key);
    expect(ok).toBe(true);
    await release();
  });
});
