/**
 * The wait loop's rules (DESIGN.md rules 3 and 4; core/wait-loop.ts), on the scripted store:
 * FIFO per key, one attempt in flight per key, keys independent, and what wakes a waiter — a
 * release here, a release message, `missed()`, or the safety net.
 */
import { describe, expect, it } from "vitest";
import type { ReleaseFunc } from "../../src/locker.js";
import { uniqueKey } from "../contracts/contract.js";
import { eventually, untilWaiting } from "../helpers/wait.js";
import { settle, useBed } from "./bed.js";

const bed = useBed();

describe("core: waiting", () => {
  it("serves the waiters of one key in arrival order (FIFO)", async () => {
    const locker = bed.locker();
    const key = uniqueKey("fifo");
    const first = await locker.lock(undefined, key);
    const order: number[] = [];
    const waiters = Array.from({ length: 8 }, (_, i) =>
      locker.lock(undefined, key).then(async (release) => {
        order.push(i);
        await release();
      }),
    );
    await untilWaiting(locker, 8);
    await first();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(locker.heldCount).toBe(0);
    expect(locker.waitingCount).toBe(0);
  });

  it("serves a key's waiters in order when the locker holds many keys (a held key's state settled to a count)", async () => {
    const locker = bed.locker();
    const releases = await Promise.all(
      Array.from({ length: 1100 }, (_, i) => locker.lock(undefined, uniqueKey(`many-${i}`))),
    );
    const key = uniqueKey("many-last");
    const first = await locker.lock(undefined, key);
    const order: number[] = [];
    const waiters = Array.from({ length: 3 }, (_, i) =>
      locker.lock(undefined, key).then(async (release) => {
        order.push(i);
        await release();
      }),
    );
    await untilWaiting(locker, 3);
    expect(locker.heldCount).toBe(1101);
    await first();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2]);
    await Promise.all(releases.map((release) => release()));
    expect(locker.heldCount).toBe(0);
    expect(locker.waitingCount).toBe(0);
  });

  it("has one attempt in flight per key, however many wait and however often they are woken", async () => {
    // A slow store, a fast safety net, and extra wake-ups: only the head of the key's queue tries.
    const locker = bed.locker({ backoffMin: 1, backoffMax: 5 });
    const { store } = locker;
    store.latency.acquire = 2;
    const key = uniqueKey("in-flight");
    store.occupy(key);
    const order: number[] = [];
    const waiters = Array.from({ length: 5 }, (_, i) =>
      locker.lock(undefined, key).then(async (release) => {
        order.push(i);
        await settle();
        await release();
      }),
    );
    await untilWaiting(locker, 5);
    const polls = store.callsOf("acquire", key).length;
    await eventually(() => {
      store.emitMissed();
      store.emitReleased(key);
      return store.callsOf("acquire", key).length >= polls + 10;
    });
    store.vacate(key);
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(store.maxInFlight.get(store.resourceOf(key))).toBe(1);
  });

  it("keeps keys independent: a key held and waited for does not delay another", async () => {
    const locker = bed.locker();
    const [a, b] = [uniqueKey("a"), uniqueKey("b")];
    const holdA = await locker.lock(undefined, a);
    const waitA = locker.lock(undefined, a);
    await untilWaiting(locker, 1);
    const holdB = await locker.lock(undefined, b);
    expect(locker.heldCount).toBe(2);
    await holdB();
    // Releasing b neither wakes nor serves a's waiter.
    await settle();
    expect(locker.waitingCount).toBe(1);
    expect(locker.store.callsOf("acquire", a)).toHaveLength(1);
    await holdA();
    await (await waitA)();
  });

  it("a release here wakes the next waiter at once, without the store announcing it", async () => {
    const locker = bed.locker(); // safety net 60 s: only the core's own wake-up can serve it in time
    const key = uniqueKey("release-here");
    const first = await locker.lock(undefined, key);
    const next = locker.lock(undefined, key);
    await untilWaiting(locker, 1);
    // While the key is held here, its waiter sends nothing (it would only be told "held").
    expect(locker.store.callsOf("acquire", key)).toHaveLength(1);
    await first();
    await (await next)();
  });

  it("a release message from the store wakes the head waiter (60 s safety net: only the event can)", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("released-event");
    store.occupy(key);
    const waiting = locker.lock(undefined, key);
    await untilWaiting(locker, 1);
    expect(store.watcher.isWatching(store.resourceOf(key))).toBe(true);
    const tries = store.callsOf("acquire", key).length;
    store.vacate(key);
    store.emitReleased(key);
    const release = await waiting;
    expect(store.callsOf("acquire", key)).toHaveLength(tries + 1);
    await release();
    // The waiter that got the key stopped watching it.
    expect(store.watcher.count(store.resourceOf(key))).toBe(0);
  });

  it("missed() wakes the head waiter of every key", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const keys = [uniqueKey("missed-1"), uniqueKey("missed-2"), uniqueKey("missed-3")];
    for (const key of keys) store.occupy(key);
    const waiting = keys.map((key) => locker.lock(undefined, key));
    await untilWaiting(locker, 3);
    for (const key of keys) store.vacate(key);
    store.emitMissed();
    const releases: ReleaseFunc[] = await Promise.all(waiting);
    expect(locker.heldCount).toBe(3);
    await Promise.all(releases.map((release) => release()));
  });

  it("the safety net tries again when no event comes (a holder elsewhere that expired silently)", async () => {
    const locker = bed.locker({ backoffMin: 5, backoffMax: 20 });
    const { store } = locker;
    const key = uniqueKey("safety-net");
    store.occupy(key);
    const waiting = locker.lock(undefined, key);
    await untilWaiting(locker, 1);
    await eventually(() => store.callsOf("acquire", key).length >= 3);
    store.vacate(key); // no emitReleased: only a poll can find out
    await (await waiting)();
  });

  it("counts held leases and waiting calls as they come and go", async () => {
    const locker = bed.locker();
    const key = uniqueKey("counts");
    expect([locker.heldCount, locker.waitingCount]).toEqual([0, 0]);
    const first = await locker.lock(undefined, key);
    // A call whose first attempt succeeds is never counted as waiting.
    expect([locker.heldCount, locker.waitingCount]).toEqual([1, 0]);
    const second = locker.lock(undefined, key);
    const third = locker.lock(undefined, key);
    await untilWaiting(locker, 2);
    expect(locker.heldCount).toBe(1);
    await first();
    const releaseSecond = await second;
    expect([locker.heldCount, locker.waitingCount]).toEqual([1, 1]);
    await releaseSecond();
    await (await third)();
    expect([locker.heldCount, locker.waitingCount]).toEqual([0, 0]);
    expect(locker.store.watcher.total).toBe(0);
  });
});
