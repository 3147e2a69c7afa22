/**
 * Giving up and closing (DESIGN.md rules 3 and 8; core/lock-core.ts, core/wait-loop.ts), on the
 * scripted store: an abort or a close ends a wait at once, leaves nothing behind, and an attempt
 * cut short in flight that then succeeds is released in the store; close waits for what is in
 * flight, refuses later calls, keeps held leases (neither released nor extended).
 */
import { describe, expect, it } from "vitest";
import { LockerClosedError, LockLostError } from "../../src/errors.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { eventually, untilWaiting } from "../helpers/wait.js";
import { expectAbortReason, rejection, settle, useBed } from "./bed.js";

const bed = useBed();

describe("core: abort", () => {
  it("an already-aborted signal rejects with its reason and sends nothing", async () => {
    const locker = bed.locker();
    const key = uniqueKey("pre-aborted");
    const signal = AbortSignal.abort(new Error("gave up before asking"));
    await expectAbortReason(locker.lock(signal, key), signal);
    await expectAbortReason(locker.tryLock(signal, key), signal);
    await expectAbortReason(locker.acquire(signal, key), signal);
    expect(locker.store.calls).toEqual([]);
    expect(locker.store.watcher.log).toEqual([]);
  });

  it("an abort while waiting rejects with signal.reason and leaves no waiter, subscription or attempt", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("abort-waiting");
    store.occupy(key);
    const controller = new AbortController();
    const waiting = locker.lock(controller.signal, key);
    await untilWaiting(locker, 1);
    const tries = store.callsOf("acquire", key).length;
    controller.abort(new Error("no longer needed"));
    await expectAbortReason(waiting, controller.signal);
    expect(locker.waitingCount).toBe(0);
    expect(store.watcher.total).toBe(0);
    // A release message after the abort wakes nobody: nothing is sent for the key.
    store.vacate(key);
    store.emitReleased(key);
    await settle();
    expect(store.callsOf("acquire", key)).toHaveLength(tries);
  });

  it("an attempt abandoned by abort in flight that then succeeds is released in the store", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("abandoned-abort");
    const gate = store.gate("acquire");
    const controller = new AbortController();
    const waiting = locker.lock(controller.signal, key);
    await gate.entered;
    controller.abort(new Error("timed out"));
    // Rejects at once, while the attempt is still in flight.
    await expectAbortReason(waiting, controller.signal);
    expect([locker.heldCount, locker.waitingCount]).toEqual([0, 0]);
    gate.open();
    await eventually(() => store.callsOf("release", key).length === 1);
    const [attempt] = store.callsOf("acquire", key);
    const [release] = store.callsOf("release", key);
    expect(attempt?.token).toBeDefined(); // the store did grant it
    expect(release?.token).toBe(attempt?.token);
    expect(release?.ordered).toBe(true); // sent after the attempt, on its connection
    await eventually(() => store.holderOf(key) === undefined);
    expect(locker.heldCount).toBe(0);
    const [acquired, releaseAgain] = await locker.tryLock(undefined, key);
    expect(acquired).toBe(true);
    await releaseAgain();
  });
});

describe("core: close", () => {
  it("rejects every waiter with the closed error, is idempotent, and refuses later calls sending nothing", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const [a, b] = [uniqueKey("close-a"), uniqueKey("close-b")];
    store.occupy(a);
    store.occupy(b);
    const waiting = [locker.lock(undefined, a), locker.lock(undefined, a), locker.lock(undefined, b)];
    await untilWaiting(locker, 3);
    const closing = [locker.close(), locker.close()];
    for (const call of waiting) expect(await rejection(call)).toBeInstanceOf(LockerClosedError);
    await Promise.all(closing);
    await locker.close();
    expect(locker.waitingCount).toBe(0);
    expect(store.watcher.total).toBe(0);
    expect(store.watcher.closed).toBe(true);
    const sent = store.calls.length;
    expect(await rejection(locker.lock(undefined, a))).toBeInstanceOf(LockerClosedError);
    expect(await rejection(locker.tryLock(undefined, a))).toBeInstanceOf(LockerClosedError);
    expect(await rejection(locker.acquire(undefined, a))).toBeInstanceOf(LockerClosedError);
    expect(store.calls).toHaveLength(sent);
  });

  it("waits for an attempt in flight, and releases what it took once it answers", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("close-in-flight");
    const gate = store.gate("acquire");
    const waiting = locker.lock(undefined, key);
    await gate.entered;
    let closed = false;
    const closing = locker.close().then(() => {
      closed = true;
    });
    expect(await rejection(waiting)).toBeInstanceOf(LockerClosedError);
    await settle();
    expect(closed).toBe(false); // the attempt is still in flight
    gate.open();
    await closing;
    // By the time close resolved, the late grant was released.
    const [attempt] = store.callsOf("acquire", key);
    const [release] = store.callsOf("release", key);
    expect(release?.token).toBe(attempt?.token);
    expect(store.holderOf(key)).toBeUndefined();
  });

  it("neither releases nor extends held leases any more; their own release still works", async () => {
    const lost: LockLostError[] = [];
    const locker = bed.locker({ onLockLost: (error) => lost.push(error) });
    const { store } = locker;
    const [kept, released] = [uniqueKey("close-kept"), uniqueKey("close-released")];
    // A lease long enough that a stalled machine does not let it run out before the checks below.
    const lease = await locker.acquire(undefined, kept, { expiry: 1000 });
    const other = await locker.acquire(undefined, released, { expiry: 1000 });
    // The keeper is at work before the close...
    await eventually(() => store.callsOf("extend", kept).length >= 1);
    await locker.close();
    const closedAt = performance.now();
    expect(store.callsOf("release")).toEqual([]);
    expect(store.holderOf(kept)).toBeDefined();
    // ...and not after it: the lease runs out, reported lost ("expired") at its deadline.
    expect(await other.releaseWithOutcome()).toBe("released");
    expect(store.holderOf(released)).toBeUndefined();
    const reason = await whenAborted(lease.lost);
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("expired");
    expect(store.callsOf("extend").filter((call) => call.at > closedAt)).toEqual([]);
    expect(lost.map((error) => error.key)).toEqual([kept]);
    // Releasing a lease that ran out after close is harmless.
    expect(await lease.releaseWithOutcome()).toBe("expired");
  });
});
