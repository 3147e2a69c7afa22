import { createHook } from "node:async_hooks";
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import {
  InvalidArgumentError,
  type Locker,
  type LockLostError,
  lockAndDo,
  MemoryLocker,
  MemoryReadWriteLocker,
  MemorySemaphore,
  type ReadWriteLocker,
} from "../../src/index.js";
import { lockerContract, uniqueKey } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { memoryLockerHarness, sameInstanceHarness } from "../helpers/memory-harness.js";
import { sleep } from "../helpers/wait.js";

/**
 * Counts the Timeout objects created from now on that are still pending (unref'ed ones too, which
 * `process.getActiveResourcesInfo()` does not list), through an async hook.
 */
function trackTimers(): { live(): number; stop(): void } {
  const pending = new Set<number>();
  const hook = createHook({
    init(id, type) {
      if (type === "Timeout") pending.add(id);
    },
    destroy(id) {
      pending.delete(id);
    },
  }).enable();
  return { live: () => pending.size, stop: () => hook.disable() };
}

lockerContract(
  "MemorySemaphore, limit 1",
  memoryLockerHarness(() => new MemorySemaphore({ limit: 1 })),
);

// The peer of a write view is the same instance's write view.
lockerContract(
  "MemoryReadWriteLocker, write view",
  memoryLockerHarness(() => new MemoryReadWriteLocker().write),
);

semaphoreContract("MemorySemaphore", async () => ({
  ...sameInstanceHarness<Locker, { limit: number }>(({ limit }) => new MemorySemaphore({ limit })),
  expires: false,
}));

readWriteContract("MemoryReadWriteLocker", async () => ({
  ...sameInstanceHarness<ReadWriteLocker, unknown>(() => new MemoryReadWriteLocker()),
  fencing: true,
}));

lockAllSuite(
  "MemorySemaphore, limit 1",
  memoryLockerHarness(() => new MemorySemaphore({ limit: 1 })),
);

describe("MemorySemaphore specifics", () => {
  it("rejects a limit that is not a positive safe integer, naming the value", () => {
    for (const limit of [0, -1, 1.5, "2", Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, null, undefined]) {
      let error: unknown;
      try {
        new MemorySemaphore({ limit: limit as number });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).argument).toBe("options.limit");
      expect((error as InvalidArgumentError).received).toBe(limit);
    }
    expect(() => new MemorySemaphore({ limit: 0 })).toThrow(/options\.limit.*safe integer >= 1.*number 0/);
  });

  it("rejects a missing or non-object options bag and unknown options", () => {
    expect(() => new (MemorySemaphore as new () => MemorySemaphore)()).toThrow(/options\.limit.*undefined/);
    expect(() => new MemorySemaphore("x" as never)).toThrow(InvalidArgumentError);
    expect(() => new MemorySemaphore({ limit: 2, max: 3 } as never)).toThrow(/options\.max.*valid options: limit/);
    expect(new MemorySemaphore({ limit: Number.MAX_SAFE_INTEGER }).limit).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("hands permits over with no timer on the path", async () => {
    const semaphore = new MemorySemaphore({ limit: 2 });
    const key = uniqueKey();
    const full = await semaphore.acquire(undefined, key, { weight: 2 });
    const waiting = semaphore.acquire(undefined, key, { weight: 2 });
    await full.release();
    let viaTimer = false;
    setImmediate(() => {
      viaTimer = true;
    });
    const next = await waiting;
    expect(viaTimer).toBe(false);
    await next.release();
  });

  it("does not grow: no entries, waiters, timers or listeners left after acquisitions, releases, aborts, expiries", async () => {
    const semaphore = new MemorySemaphore({ limit: 3 });
    const timers = trackTimers();
    const shared = new AbortController(); // one signal shared by many waits, never aborted
    for (let round = 0; round < 30; round++) {
      const key = uniqueKey();
      const held = await semaphore.acquire(shared.signal, key, { weight: 2 });
      const controller = new AbortController();
      const aborted = semaphore.acquire(controller.signal, key, { weight: 3 }).catch(() => undefined);
      const waiting = semaphore.acquire(shared.signal, key, { weight: 1 });
      const expiring = semaphore.acquire(shared.signal, key, { weight: 1, autoExtend: false, expiry: 60_000 });
      await sleep(0); // a caller counts as waiting once its first attempt has failed
      expect(semaphore.waitingCount).toBe(3);
      controller.abort();
      await aborted;
      await (await waiting).release();
      await (await expiring).release(); // its timer is cleared
      await held.release();
    }
    expect(semaphore.heldCount).toBe(0);
    expect(semaphore.waitingCount).toBe(0);
    expect(getEventListeners(shared.signal, "abort")).toHaveLength(0);
    await new Promise((resolve) => setImmediate(resolve)); // destroy hooks run after the release
    expect(timers.live()).toBe(0);
    timers.stop();
    await semaphore.close();
  });

  it("counts held keys and waiting callers", async () => {
    const semaphore = new MemorySemaphore({ limit: 2 });
    const [a, b] = [uniqueKey(), uniqueKey()];
    const leases = [await semaphore.acquire(undefined, a), await semaphore.acquire(undefined, b, { weight: 2 })];
    const waiting = semaphore.acquire(undefined, b);
    await sleep(0); // a caller counts as waiting once its first attempt has failed
    expect(semaphore.heldCount).toBe(2);
    expect(semaphore.waitingCount).toBe(1);
    await leases[1]?.release();
    await (await waiting).release();
    await leases[0]?.release();
    expect(semaphore.heldCount).toBe(0);
  });

  it("issues rising fencing tokens with limit 1 only", async () => {
    const one = new MemorySemaphore({ limit: 1 });
    const key = uniqueKey();
    const first = await lockAndDo(one, undefined, key, (lease) => lease.fencingToken);
    expect(first).toBeUndefined();
    const tokens: bigint[] = [];
    for (let i = 0; i < 3; i++) {
      const lease = await one.acquire(undefined, key, { fencing: true });
      tokens.push(lease.fencingToken as bigint);
      await lease.release();
    }
    expect(tokens[1]).toBeGreaterThan(tokens[0] as bigint);
    expect(tokens[2]).toBeGreaterThan(tokens[1] as bigint);
    await expect(new MemorySemaphore({ limit: 2 }).acquire(undefined, key, { fencing: true })).rejects.toThrow(
      /exclusive grant.*limit 2/,
    );
  });
});

describe("MemoryReadWriteLocker specifics", () => {
  it("rejects options it does not know", () => {
    expect(() => new MemoryReadWriteLocker({ fair: true } as never)).toThrow(/options\.fair/);
    expect(() => new MemoryReadWriteLocker("x" as never)).toThrow(InvalidArgumentError);
    expect(() => new MemoryReadWriteLocker({})).not.toThrow();
  });

  it("does not grow: no entries or waiters left after reads, writes and aborts", async () => {
    const rw = new MemoryReadWriteLocker();
    for (let round = 0; round < 30; round++) {
      const key = uniqueKey();
      const reader = await rw.read.acquire(undefined, key);
      const controller = new AbortController();
      const writer = rw.write.acquire(controller.signal, key).catch(() => undefined);
      const lateReader = rw.read.acquire(undefined, key);
      await sleep(0);
      expect(rw.waitingCount).toBe(2);
      controller.abort(); // the late reader was queued only behind the writer: it gets in
      await writer;
      await (await lateReader).release();
      await reader.release();
    }
    expect(rw.heldCount).toBe(0);
    expect(rw.waitingCount).toBe(0);
    await rw.close();
  });

  it("a read lease with autoExtend: false expires and lets a queued writer in", async () => {
    const rw = new MemoryReadWriteLocker();
    const key = uniqueKey();
    const reader = await rw.read.acquire(undefined, key, { autoExtend: false, expiry: 50 });
    const writer = await rw.write.acquire(AbortSignal.timeout(2000), key);
    expect(reader.lost.aborted).toBe(true);
    expect(await reader.releaseWithOutcome()).toBe("expired");
    expect(await writer.releaseWithOutcome()).toBe("released");
    await rw.close();
  });
});

describe("memory leases: expiry and autoExtend: false", () => {
  const lockers: Array<[string, () => Locker]> = [
    ["MemoryLocker", () => new MemoryLocker()],
    ["MemorySemaphore", () => new MemorySemaphore({ limit: 1 })],
    ["the write view", () => new MemoryReadWriteLocker().write],
  ];
  for (const [name, make] of lockers) {
    it(`${name}: autoExtend: false requires an expiry, which must be a timer delay; expiry alone changes nothing`, async () => {
      const locker = make();
      const key = uniqueKey();
      await expect(locker.acquire(undefined, key, { autoExtend: false })).rejects.toThrow(
        /options\.expiry.*no default expiry.*undefined/,
      );
      await expect(locker.tryAcquire(undefined, key, { autoExtend: false, expiry: 2 ** 31 })).rejects.toThrow(
        /options\.expiry.*2147483647/,
      );
      const lease = await locker.tryAcquire(undefined, key, { expiry: 10 }); // ignored: held until released
      await sleep(40);
      expect(lease?.lost.aborted).toBe(false);
      lease?.assertHeld();
      expect(await lease?.releaseWithOutcome()).toBe("released");
      await locker.close();
    });

    it(`${name}: past the deadline, a blocked event loop's late timer does not matter`, async () => {
      const locker = make();
      const key = uniqueKey();
      const lease = await locker.acquire(undefined, key, { autoExtend: false, expiry: 20 });
      const waiting = locker.acquire(AbortSignal.timeout(2000), key);
      const until = performance.now() + 40;
      while (performance.now() < until) {
        // Blocks the event loop past the deadline: the expiry timer cannot fire.
      }
      expect(lease.lost.aborted).toBe(false);
      expect(() => lease.assertHeld()).toThrow(/expired|ran out/);
      expect(lease.lost.aborted).toBe(true); // assertHeld expired it: the lock is freed
      const next = await waiting;
      expect(await lease.releaseWithOutcome()).toBe("expired");
      next.assertHeld();
      expect(await next.releaseWithOutcome()).toBe("released");
      const late = await locker.acquire(undefined, key, { autoExtend: false, expiry: 20 });
      const stop = performance.now() + 40;
      while (performance.now() < stop) {
        // Blocked again; this time the release is what notices.
      }
      expect(await late.releaseWithOutcome()).toBe("expired");
      expect((late.lost.reason as LockLostError).reason).toBe("expired");
      await locker.close();
    });

    it(`${name}: expiring leases leave no timer behind once released or expired`, async () => {
      const locker = make();
      const timers = trackTimers();
      try {
        const leases = await Promise.all(
          Array.from({ length: 20 }, () =>
            locker.acquire(undefined, uniqueKey(), { autoExtend: false, expiry: 60_000 }),
          ),
        );
        expect(timers.live()).toBe(1); // the lease keeper's one timer watches every deadline
        await Promise.all(leases.map((lease) => lease.release()));
        const short = await locker.acquire(undefined, uniqueKey(), { autoExtend: false, expiry: 10 });
        await new Promise((resolve) => short.lost.addEventListener("abort", resolve, { once: true }));
        await new Promise((resolve) => setImmediate(resolve)); // destroy hooks run after the callback
        expect(timers.live()).toBe(0);
        // Held until released: no timer at all.
        const plain = await locker.acquire(undefined, uniqueKey(), { expiry: 10 });
        expect(timers.live()).toBe(0);
        await plain.release();
      } finally {
        timers.stop();
        await locker.close();
      }
    });
  }
});
