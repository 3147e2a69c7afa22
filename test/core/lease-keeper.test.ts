/**
 * The lease keeper's rules (DESIGN.md rule 5; core/lease-keeper.ts), on the scripted store with
 * short leases in real time. Assertions are orderings and bounds that hold however late a loaded
 * machine runs the timers (an extension is never sent before it is due, nor after the lease ran
 * out while it was kept), never a wall-clock number.
 */
import { describe, expect, it } from "vitest";
import { LockLostError, StoreUnavailableError } from "../../src/errors.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { eventually, untilWaiting } from "../helpers/wait.js";
import { settle, useBed } from "./bed.js";
import type { FakeBackend } from "./fake-backend.js";

const bed = useBed();

/** A transient store failure (the lease may still be held). */
const transient = (): StoreUnavailableError =>
  new StoreUnavailableError("fake", "The fake store did not answer in time", { cause: new Error("ETIMEDOUT") });

/** Every extension the keeper sent went out before that lease's validity ran out. */
function expectSentInTime(store: FakeBackend): void {
  for (const call of store.callsOf("extend")) expect(call.at).toBeLessThan(call.validUntil as number);
}

/** A hook that records the losses it is told of. */
function lossLog(): { lost: LockLostError[]; onLockLost: (error: LockLostError) => void } {
  const lost: LockLostError[] = [];
  return { lost, onLockLost: (error) => lost.push(error) };
}

describe("core: lease keeper", () => {
  it("schedules each lease's extension from its own validity: a longer lease is extended later", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const [short, long] = [uniqueKey("short"), uniqueKey("long")];
    // Acquired in one turn: both granted at (nearly) the same moment.
    const leases = await Promise.all([
      locker.acquire(undefined, short, { expiry: 200 }),
      locker.acquire(undefined, long, { expiry: 800 }),
    ]);
    await eventually(() => store.callsOf("extend", long).length >= 1 && store.callsOf("extend", short).length >= 3);
    expectSentInTime(store);
    // Never sent before it was due: half its lease before its deadline, less the keeper's window
    // for gathering leases due together (a sixteenth of the lease).
    for (const [key, expiry] of [
      [short, 200],
      [long, 800],
    ] as const) {
      for (const call of store.callsOf("extend", key)) {
        expect((call.validUntil as number) - call.at).toBeLessThanOrEqual(expiry / 2 + expiry / 16 + 1);
      }
    }
    const firstLong = store.callsOf("extend", long)[0]?.at as number;
    const shortBefore = store.callsOf("extend", short).filter((call) => call.at < firstLong);
    expect(shortBefore.length).toBeGreaterThanOrEqual(1);
    for (const lease of leases) expect(lease.lost.aborted).toBe(false);
    await Promise.all(leases.map((lease) => lease.release()));
  });

  it("extends a lease before the validity its store gave, even when that is shorter than its length", async () => {
    const locker = bed.locker();
    const { store } = locker;
    store.drift = 150; // a 400 ms key whose handle is valid for 250 ms
    const key = uniqueKey("drift");
    const lease = await locker.acquire(undefined, key, { expiry: 400 });
    await eventually(() => store.callsOf("extend", key).length >= 2);
    expectSentInTime(store);
    expect(lease.lost.aborted).toBe(false);
    await lease.release();
  });

  it("extends leases that are due together in one call", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const keys = [uniqueKey("batch-1"), uniqueKey("batch-2"), uniqueKey("batch-3")];
    const leases = await Promise.all(keys.map((key) => locker.acquire(undefined, key, { expiry: 300 })));
    await eventually(() => keys.every((key) => store.callsOf("extend", key).length >= 1));
    const firstBatches = new Set(keys.map((key) => store.callsOf("extend", key)[0]?.batch));
    expect(firstBatches.size).toBe(1);
    await Promise.all(leases.map((lease) => lease.release()));
  });

  it("has at most sweepConcurrency extension calls in flight", async () => {
    const locker = bed.locker({ sweepConcurrency: 1 });
    const { store } = locker;
    const [first, second] = [uniqueKey("sweep-1"), uniqueKey("sweep-2")];
    const gate = store.gate("extend");
    const a = await locker.acquire(undefined, first, { expiry: 1000 });
    const b = await locker.acquire(undefined, second, { expiry: 1200 });
    await gate.entered;
    // Wait until the second lease is due (half its lease before its deadline) with the first's
    // extension still in flight: the second waits for it.
    const secondDue = (store.callsOf("acquire", second)[0]?.at as number) + 600;
    await eventually(() => performance.now() > secondDue + 20);
    expect(store.callsOf("extend", second)).toEqual([]);
    const openedAt = performance.now();
    gate.open();
    await eventually(() => store.callsOf("extend", second).length >= 1);
    expect(store.callsOf("extend", second)[0]?.at).toBeGreaterThanOrEqual(openedAt);
    expect(store.maxExtendsInFlight).toBe(1);
    expectSentInTime(store);
    await Promise.all([a.release(), b.release()]);
  });

  it("retries a transient extension error; the lease is not lost when a retry succeeds", async () => {
    const { lost, onLockLost } = lossLog();
    const locker = bed.locker({ onLockLost });
    const { store } = locker;
    const key = uniqueKey("transient");
    store.failNext("extend", transient());
    const lease = await locker.acquire(undefined, key, { expiry: 600 });
    await eventually(() => locker.leaseStats.extensions >= 1);
    expect(locker.leaseStats.retries).toBeGreaterThanOrEqual(1);
    expect(store.callsOf("extend", key).length).toBeGreaterThanOrEqual(2);
    expectSentInTime(store);
    expect(lease.lost.aborted).toBe(false);
    expect(() => lease.assertHeld()).not.toThrow();
    expect(lost).toEqual([]);
    await lease.release();
  });

  it("an extension answering taken reports the loss once, stops extending it, and wakes the next waiter", async () => {
    const { lost, onLockLost } = lossLog();
    const locker = bed.locker({ onLockLost });
    const { store } = locker;
    const [key, other] = [uniqueKey("taken"), uniqueKey("still-held")];
    const lease = await locker.acquire(undefined, key, { expiry: 300 });
    const kept = await locker.acquire(undefined, other, { expiry: 300 });
    const waiting = locker.lock(undefined, key); // 60 s safety net: only the loss can wake it
    await untilWaiting(locker, 1);
    const token = store.drop(key);
    const reason = await whenAborted(lease.lost);
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("taken");
    const release = await waiting;
    // Other leases are still extended; the lost one never again (the store would have noted it).
    const after = store.callsOf("extend", other).length;
    await eventually(() => store.callsOf("extend", other).length >= after + 2);
    expect(store.calls.filter((call) => call.op === "extend" && call.token === token)).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBe(reason);
    expect(() => lease.assertHeld()).toThrow(LockLostError);
    await Promise.all([release(), kept.release(), lease.release()]);
  });

  it("a loss the store reports (lost event) is reported once, even when an extension then fails too", async () => {
    const { lost, onLockLost } = lossLog();
    const locker = bed.locker({ onLockLost });
    const { store } = locker;
    const key = uniqueKey("lost-event");
    const gate = store.gate("extend");
    const lease = await locker.acquire(undefined, key, { expiry: 300 });
    const token = store.holderOf(key) as string;
    await gate.entered; // its extension is in flight
    store.emitLost([token], "expired", new Error("session ended"));
    expect(lease.lost.aborted).toBe(true);
    expect(((await whenAborted(lease.lost)) as LockLostError).reason).toBe("expired");
    expect(locker.heldCount).toBe(0);
    store.emitLost([token], "taken"); // told twice
    gate.open(); // the extension answers "taken": the key is gone
    await settle();
    expect(lost).toHaveLength(1);
    expect(lost[0]?.reason).toBe("expired");
    await lease.release();
  });

  it("a lease whose extensions all fail is lost when its validity runs out, not before", async () => {
    const { lost, onLockLost } = lossLog();
    const locker = bed.locker({ onLockLost });
    const { store } = locker;
    const key = uniqueKey("all-fail");
    store.failNext("extend", transient(), 1000);
    const lease = await locker.acquire(undefined, key, { expiry: 300 });
    const validUntil = (store.callsOf("acquire", key)[0]?.at as number) + 300;
    let lostAt = 0;
    lease.lost.addEventListener("abort", () => {
      lostAt = performance.now();
    });
    const reason = await whenAborted(lease.lost);
    expect((reason as LockLostError).reason).toBe("expired");
    expect(lostAt).toBeGreaterThanOrEqual(Math.floor(validUntil));
    expect(locker.leaseStats.retries).toBeGreaterThanOrEqual(2);
    expectSentInTime(store);
    expect(lost).toHaveLength(1);
    expect(locker.heldCount).toBe(0);
    store.script.extend.length = 0;
    await lease.release();
  });

  it("never extends a lease acquired with autoExtend: false; it expires quietly (no onLockLost)", async () => {
    const { lost, onLockLost } = lossLog();
    const locker = bed.locker({ onLockLost });
    const { store } = locker;
    const key = uniqueKey("no-extend");
    const lease = await locker.acquire(undefined, key, { expiry: 150, autoExtend: false });
    const reason = await whenAborted(lease.lost);
    expect((reason as LockLostError).reason).toBe("expired");
    expect(store.callsOf("extend", key)).toEqual([]);
    expect(lost).toEqual([]);
    expect(locker.heldCount).toBe(0);
    expect(await lease.releaseWithOutcome()).toBe("expired");
  });
});
