import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { InvalidArgumentError, LockerClosedError, MemoryLocker } from "../../src/index.js";
import { lockerContract, uniqueKey } from "../contracts/contract.js";
import { memoryLockerHarness } from "../helpers/memory-harness.js";

lockerContract(
  "MemoryLocker",
  memoryLockerHarness(() => new MemoryLocker()),
);

describe("MemoryLocker specifics", () => {
  it("hands the key to the next waiter with no timer on the path", async () => {
    const locker = new MemoryLocker();
    const key = uniqueKey();
    const release = await locker.lock(undefined, key);
    const waiting = locker.lock(undefined, key);
    await release();
    // The hand-off settles within microtasks: no macrotask (timer) runs in between.
    let viaTimer = false;
    setImmediate(() => {
      viaTimer = true;
    });
    const release2 = await waiting;
    expect(viaTimer).toBe(false);
    await release2();
    await locker.close();
  });

  it("does not grow: no entries, timers or listeners left after locks, releases and aborts", async () => {
    const locker = new MemoryLocker();
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    for (let round = 0; round < 50; round++) {
      const key = uniqueKey();
      const release = await locker.lock(undefined, key);
      const controller = new AbortController();
      const aborted = locker.lock(controller.signal, key).catch(() => undefined);
      const waiting = locker.lock(undefined, key);
      controller.abort();
      await aborted;
      await release();
      await (await waiting)();
    }
    expect(locker.heldCount).toBe(0);
    expect(process.getActiveResourcesInfo().filter((r) => r === "Timeout").length).toBe(timersBefore);
    await locker.close();
  });

  it("tryAcquire and expiring leases leave no entries or listeners behind either", async () => {
    const locker = new MemoryLocker();
    const shared = new AbortController(); // one signal shared by many waits, never aborted
    for (let round = 0; round < 50; round++) {
      const key = uniqueKey();
      const lease = await locker.tryAcquire(shared.signal, key, { weight: 1 });
      expect(await locker.tryAcquire(shared.signal, key)).toBeUndefined();
      const expiring = locker.acquire(shared.signal, key, { autoExtend: false, expiry: 5 });
      await lease?.release();
      const expired = await expiring;
      await new Promise((resolve) => expired.lost.addEventListener("abort", resolve, { once: true }));
      expect(await expired.releaseWithOutcome()).toBe("expired");
    }
    expect(locker.heldCount).toBe(0);
    expect(getEventListeners(shared.signal, "abort")).toHaveLength(0);
    await locker.close();
  });

  it("hands an expired lock to the next waiter with no extra timer on the path", async () => {
    const locker = new MemoryLocker();
    const key = uniqueKey();
    const lease = await locker.acquire(undefined, key, { autoExtend: false, expiry: 30 });
    let lost = false;
    let laterTurn = false;
    lease.lost.addEventListener("abort", () => {
      lost = true;
      // Runs after the current turn's microtasks: if the grant waited for another timer (or a
      // poll), this would run first.
      setImmediate(() => {
        laterTurn = true;
      });
    });
    const next = await locker.acquire(AbortSignal.timeout(20_000), key);
    expect(lost).toBe(true); // granted by the expiry itself,
    expect(laterTurn).toBe(false); // in the same turn
    expect(await next.releaseWithOutcome()).toBe("released");
    await locker.close();
  });

  it("a release hands the waiter its lease directly: FIFO, fenced, counted, and close rejects the rest", async () => {
    const locker = new MemoryLocker();
    const key = uniqueKey();
    const first = await locker.acquire(undefined, key, { fencing: true });
    const order: string[] = [];
    const fenced = locker.acquire(undefined, key, { fencing: true }).then((lease) => {
      order.push("fenced");
      return lease;
    });
    const plain = locker.lock(undefined, key).then((release) => {
      order.push("plain");
      return release;
    });
    const last = locker.lock(undefined, key);
    expect(locker.waitingCount).toBe(3);
    await first.release();
    const second = await fenced;
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken as bigint);
    expect([locker.heldCount, locker.waitingCount]).toEqual([1, 2]);
    await second.release();
    await (await plain)();
    expect(order).toEqual(["fenced", "plain"]);
    // `last` holds the key now; one more waits behind it when the locker closes.
    const releaseLast = await last;
    const behind = locker.lock(undefined, key);
    expect(locker.waitingCount).toBe(1);
    const closing = locker.close();
    await expect(behind).rejects.toBeInstanceOf(LockerClosedError);
    expect(locker.waitingCount).toBe(0);
    await releaseLast();
    await closing;
    expect(locker.heldCount).toBe(0);
  });

  it("inspect shows a fenced holder's fencing token, taken at once or granted from the queue", async () => {
    const locker = new MemoryLocker();
    const key = uniqueKey("inspect-fenced");
    const first = await locker.acquire(undefined, key, { fencing: true });
    expect((await locker.inspect(undefined, key)).holders).toEqual([
      expect.objectContaining({ weight: 1, fencingToken: first.fencingToken }),
    ]);
    const waiting = locker.acquire(undefined, key, { fencing: true });
    await first.release();
    const second = await waiting;
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken as bigint);
    expect((await locker.inspect(undefined, key)).holders).toEqual([
      expect.objectContaining({ fencingToken: second.fencingToken }),
    ]);
    await second.release();
    const plain = await locker.acquire(undefined, key);
    expect((await locker.inspect(undefined, key)).holders[0]).not.toHaveProperty("fencingToken");
    await plain.release();
  });

  it("rejects options that are not an object", () => {
    expect(() => new MemoryLocker("x" as never)).toThrow(InvalidArgumentError);
  });
});
