/**
 * Leases on a slow or partitioned link, through a TCP proxy on 127.0.0.1 that adds latency or
 * black-holes traffic between the locker and a real redis-server.
 */
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type LockLostError, RedisLocker } from "../../src/index.js";
import { TcpProxy } from "../../support/tcp-proxy.mjs";
import { uniqueKey } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { sleep } from "../helpers/wait.js";

let fixture: RedisFixture;
let proxy: TcpProxy;
const cleanups: Array<() => unknown> = [];
beforeEach(async () => {
  fixture = await RedisFixture.start(1);
  const port = fixture.servers[0]?.port;
  if (port === undefined) throw new Error("no server");
  proxy = await TcpProxy.start(port);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await proxy?.close();
  await fixture?.stop();
});

/** A locker whose connections all go through the proxy. */
function lockerThroughProxy(options: ConstructorParameters<typeof RedisLocker>[1]): RedisLocker {
  const client = new Redis({ host: "127.0.0.1", port: proxy.port, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  client.on("error", () => undefined);
  const locker = new RedisLocker(client, options);
  cleanups.push(
    () => client.disconnect(),
    () => locker.close(),
  );
  return locker;
}

describe("a 600 ms round trip", () => {
  // Scheduled from its validity (half of 2000 ms after the acquire was sent), the first extension's
  // reply comes about 400 ms before the lease would run out; scheduled from the acquire's reply, it
  // would come after. The proxy's delays are timers in this worker, which a loaded full run once
  // stretched by those 400 ms: a failed run is repeated, twice at most.
  it("keeps a fresh lease (expiry 2000, operationTimeout 900): its first extension is scheduled from its own validity", {
    timeout: 20_000,
    retry: 2,
  }, async () => {
    const lost: LockLostError[] = [];
    const locker = lockerThroughProxy({ expiry: 2000, operationTimeout: 900, onLockLost: (e) => lost.push(e) });
    const direct = fixture.locker({ expiry: 2000 });
    // Warm the scripts (and connections) without latency.
    const [, warm] = await locker.tryLock(undefined, uniqueKey("warm"));
    await warm();
    proxy.setLatency(300);
    const key = uniqueKey("slow");
    const lease = await locker.acquire(undefined, key);
    // Three leases long: at least three extensions, each a 600 ms round trip.
    for (let i = 0; i < 12; i++) {
      await sleep(500);
      expect((await direct.tryLock(undefined, key))[0]).toBe(false);
    }
    expect(lost).toEqual([]);
    expect(lease.lost.aborted).toBe(false);
    const stats = locker.leaseStats;
    expect(stats.extensions).toBeGreaterThanOrEqual(3);
    // Every extension was confirmed with validity to spare: measured, not assumed.
    expect(stats.minHeadroomMs).toBeGreaterThan(0);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });
});

describe("a 700 ms round trip with fencing", () => {
  it("keeps a fenced lease: its token comes with the grant, so the first extension is not a round trip late", async () => {
    const lost: LockLostError[] = [];
    const locker = lockerThroughProxy({ expiry: 2000, operationTimeout: 900, onLockLost: (e) => lost.push(e) });
    const [, warm] = await locker.tryLock(undefined, uniqueKey("warm"));
    await warm();
    proxy.setLatency(350);
    const lease = await locker.acquire(undefined, uniqueKey("fenced-slow"), { fencing: true });
    expect(typeof lease.fencingToken).toBe("bigint");
    await sleep(3000);
    expect(lost).toEqual([]);
    expect(lease.lost.aborted).toBe(false);
    expect(locker.leaseStats.minHeadroomMs).toBeGreaterThan(0);
    expect(await lease.releaseWithOutcome()).toBe("released");
  }, 20_000);
});

describe("a partition shorter than the lease", () => {
  it("retries the extension that timed out and keeps the lease", async () => {
    const lost: LockLostError[] = [];
    const locker = lockerThroughProxy({ expiry: 3000, operationTimeout: 400, onLockLost: (e) => lost.push(e) });
    const direct = fixture.locker({ expiry: 3000 });
    const key = uniqueKey("partition");
    const lease = await locker.acquire(undefined, key);
    // The first extension is due about 1500 ms after the grant; it meets the partition.
    await sleep(1300);
    proxy.blackhole(true);
    await sleep(900);
    proxy.blackhole(false);
    await sleep(2500);
    expect(lost).toEqual([]);
    expect(locker.leaseStats.retries).toBeGreaterThanOrEqual(1);
    expect((await direct.tryLock(undefined, key))[0]).toBe(false);
    expect(await lease.releaseWithOutcome()).toBe("released");
  }, 20_000);

  it("declares the lease lost at its deadline when the partition outlasts it, and the key frees itself", async () => {
    const lost: LockLostError[] = [];
    const locker = lockerThroughProxy({ expiry: 1500, operationTimeout: 300, onLockLost: (e) => lost.push(e) });
    const direct = fixture.locker({ expiry: 1500 });
    const key = uniqueKey("partition-long");
    const lease = await locker.acquire(undefined, key);
    proxy.blackhole(true, { drop: true });
    // Who notices first: the holder that its lease ran out, or another locker that the key expired
    // in Redis (it waits meanwhile, polling). The holder must, whatever the machine's load: its
    // local deadline comes before the key's TTL ends.
    const events: string[] = [];
    const lostSeen = new Promise<void>((resolve) =>
      lease.lost.addEventListener(
        "abort",
        () => {
          events.push("lost");
          resolve();
        },
        { once: true },
      ),
    );
    const taken = direct.lock(AbortSignal.timeout(10_000), key).then((release) => {
      events.push("taken by another"); // the key expired in Redis
      return release;
    });
    await lostSeen;
    const release = await taken;
    expect(events).toEqual(["lost", "taken by another"]);
    expect(lost.map((e) => e.reason)).toEqual(["expired"]);
    await release();
    proxy.blackhole(false);
    proxy.cutAll();
  }, 20_000);
});
