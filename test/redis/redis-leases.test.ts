/** Leases, lost-lock signals, release outcomes and fencing tokens against real redis-server. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { fencedWrite, LockLostError, UnsupportedError } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually } from "../helpers/wait.js";

/** Blocks the event loop (a long GC pause, a CPU-bound handler) for `ms`. */
function blockEventLoop(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // spin
  }
}

let fixture: RedisFixture;
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
});
afterAll(async () => {
  await fixture?.stop();
});

describe("lost-lock signal", () => {
  it("aborts with a LockLostError when an extension finds the key gone; the holder is not cancelled", async () => {
    const admin = fixture.admin();
    // A command timeout (500 ms) a loaded machine does not reach.
    const locker = fixture.locker({ expiry: 2000 });
    const key = uniqueKey();
    const lease = await locker.acquire(undefined, key);
    const reasons: unknown[] = [];
    lease.lost.addEventListener("abort", () => reasons.push(lease.lost.reason));
    await admin.del(`globallock:${key}`);
    await eventually(() => lease.lost.aborted, 10_000); // at the next extension
    expect(reasons).toHaveLength(1);
    expect(lease.lost.reason).toBeInstanceOf(LockLostError);
    expect((lease.lost.reason as LockLostError).reason).toBe("taken");
    expect(() => lease.assertHeld()).toThrow(lease.lost.reason as Error);
    expect(await lease.releaseWithOutcome()).toBe("expired");
  });

  it("assertHeld throws at once after the event loop was blocked past the deadline, before any timer ran", async () => {
    const locker = fixture.locker({ expiry: 1000, operationTimeout: 490 }); // not reached under load
    const lease = await locker.acquire(undefined, uniqueKey());
    lease.assertHeld();
    blockEventLoop(1100); // longer than the lease: no extension could run
    expect(() => lease.assertHeld()).toThrow(/lease ran out/);
    expect(lease.lost.aborted).toBe(true);
    expect((lease.lost.reason as LockLostError).reason).toBe("expired");
    await lease.release();
  });

  it("fires at the local deadline when Redis stops answering (SIGSTOP)", async () => {
    const frozen = await RedisFixture.start(1);
    try {
      const expiry = 1000;
      const locker = frozen.locker({ expiry, operationTimeout: 490 }); // not reached under load
      const started = performance.now(); // before the lease's validity began
      const lease = await locker.acquire(undefined, uniqueKey());
      frozen.servers[0]?.pause();
      await eventually(() => lease.lost.aborted, 10_000);
      // Not before the validity (expiry minus drift: 1% of it plus 2 ms, as redlock counts it) could
      // have run out; deadlines are kept in whole ms, rounded down (on the safe side), so up to 1 ms
      // earlier than the exact value.
      const drift = Math.round(expiry * 0.01) + 2;
      expect(performance.now() - started).toBeGreaterThanOrEqual(expiry - drift - 1);
      expect((lease.lost.reason as LockLostError).reason).toBe("expired");
      frozen.servers[0]?.resume();
    } finally {
      frozen.servers[0]?.resume();
      await frozen.stop();
    }
  });
});

describe("release outcomes", () => {
  it("released, expired (key gone), taken (another token now), without ever rejecting", async () => {
    const admin = fixture.admin();
    const locker = fixture.locker({ expiry: 5000 });
    const key = uniqueKey();
    expect(await (await locker.acquire(undefined, key)).releaseWithOutcome()).toBe("released");

    const gone = await locker.acquire(undefined, key);
    await admin.del(`globallock:${key}`);
    expect(await gone.releaseWithOutcome()).toBe("expired");

    const stolen = await locker.acquire(undefined, key);
    await admin.set(`globallock:${key}`, "someone-else");
    expect(await stolen.releaseWithOutcome()).toBe("taken");
    expect(await admin.get(`globallock:${key}`)).toBe("someone-else"); // left alone
    await admin.del(`globallock:${key}`);
  });

  it("is unknown, not a rejection, when Redis cannot be asked", async () => {
    const down = await RedisFixture.start(1);
    const locker = down.locker({ expiry: 1000 });
    const lease = await locker.acquire(undefined, uniqueKey());
    await down.servers[0]?.kill();
    expect(await lease.releaseWithOutcome()).toBe("unknown");
    await down.stop();
  });
});

describe("fencing tokens", () => {
  const cleanup: RedisFixture[] = [];
  afterEach(async () => {
    await Promise.all(cleanup.splice(0).map((f) => f.stop()));
  });

  it("a holder that lost its lock has a lower token than the next holder, and its writes are rejected", async () => {
    const admin = fixture.admin();
    // Command timeouts (just under expiry / 2 for A) that a loaded machine does not reach.
    const a = fixture.locker({ expiry: 1000, operationTimeout: 490 });
    const b = fixture.locker({ expiry: 5000 });
    const key = uniqueKey();
    const resource = `resource:${key}`;
    const first = await a.acquire(undefined, key, { fencing: true });
    expect(await fencedWrite(admin, resource, first.fencingToken as bigint, "from A")).toBe(true);
    blockEventLoop(1300); // A "pauses" past its lease; its key expires in Redis
    const second = await b.acquire(AbortSignal.timeout(5000), key, { fencing: true });
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken as bigint);
    expect(await fencedWrite(admin, resource, second.fencingToken as bigint, "from B")).toBe(true);
    // A resumes, still inside its critical section: its write carries the old token.
    expect(await fencedWrite(admin, resource, first.fencingToken as bigint, "stale A")).toBe(false);
    expect(await admin.hget(resource, "value")).toBe("from B");
    expect(await fencedWrite(admin, resource, second.fencingToken as bigint, "B again")).toBe(true);
    await first.release();
    await second.release();
  });

  it("a waiter handed the key by a release gets a fencing token above the releaser's", async () => {
    const a = fixture.locker();
    const b = fixture.locker();
    const key = uniqueKey();
    const first = await a.acquire(undefined, key, { fencing: true });
    const waiting = b.acquire(AbortSignal.timeout(5000), key, { fencing: true });
    await eventually(() => b.waitingCount === 1);
    await first.release();
    const second = await waiting;
    expect(typeof second.fencingToken).toBe("bigint");
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken as bigint);
    second.assertHeld();
    await second.release();
  });

  it("keep rising across a Redis restart without persistence", async () => {
    const restarted = await RedisFixture.start(1);
    cleanup.push(restarted);
    const locker = restarted.locker({ expiry: 1000 });
    const key = uniqueKey();
    const before = await locker.acquire(undefined, key, { fencing: true });
    await before.release();
    await restarted.servers[0]?.restart();
    const admin = restarted.admin();
    await eventually(async () => (await admin.ping().catch(() => "")) === "PONG");
    expect(await admin.dbsize()).toBe(0); // the counter is gone with everything else
    const after = await locker.acquire(AbortSignal.timeout(5000), key, { fencing: true });
    expect(after.fencingToken).toBeGreaterThan(before.fencingToken as bigint);
    await after.release();
  });

  it("are refused with a typed error on a multi-node quorum, before anything is sent", async () => {
    const quorum = await RedisFixture.start(3);
    cleanup.push(quorum);
    const locker = quorum.locker();
    const key = uniqueKey();
    await expect(locker.acquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
    for (let i = 0; i < 3; i++) expect(await quorum.admin(i).dbsize()).toBe(0);
  });

  it("fencedWrite rejects bad input with a typed error", async () => {
    const admin = fixture.admin();
    await expect(fencedWrite(admin, "", 1n, "v")).rejects.toThrow(/key/);
    await expect(fencedWrite(admin, "k", 1 as never, "v")).rejects.toThrow(/fencingToken.*bigint.*number 1/);
    await expect(fencedWrite(admin, "k", 1n, 5 as never)).rejects.toThrow(/value.*string.*number 5/);
  });

  it("compares tokens exactly beyond 2^53", async () => {
    const admin = fixture.admin();
    const key = `fenced:${uniqueKey()}`;
    const big = 2n ** 60n;
    expect(await fencedWrite(admin, key, big + 1n, "newer")).toBe(true);
    expect(await fencedWrite(admin, key, big, "older by one")).toBe(false);
    expect(await fencedWrite(admin, key, big + 1n, "same token again")).toBe(true);
  });
});
