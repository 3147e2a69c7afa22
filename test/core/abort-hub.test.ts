/**
 * One abort listener per signal, whatever the number of calls waiting on it: no
 * MaxListenersExceededWarning for a request-scoped signal shared by many locks, and nothing left
 * on the signal afterwards.
 */
import { getEventListeners } from "node:events";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Locker, MemoryLocker } from "../../src/index.js";
import { CloseGate, onAnyAbort, subscribeAbort } from "../../src/internal/abortable.js";
import { uniqueKey } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

const listeners = (signal: AbortSignal): number => getEventListeners(signal, "abort").length;

/** Collects process warnings of one name between `beforeEach` and the test's end. */
const warnings: Error[] = [];
const onWarning = (warning: Error): void => {
  if (warning.name === "MaxListenersExceededWarning") warnings.push(warning);
};
beforeEach(() => {
  warnings.length = 0;
  process.on("warning", onWarning);
});
afterEach(() => {
  process.off("warning", onWarning);
});

/** Lets pending `process.emitWarning` calls (emitted on next tick) arrive. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("abort hub", () => {
  it("control: 11 plain listeners on one signal do trip the warning this suite listens for", async () => {
    const controller = new AbortController();
    const added = Array.from({ length: 11 }, () => () => undefined);
    for (const listener of added) controller.signal.addEventListener("abort", listener);
    await settle();
    for (const listener of added) controller.signal.removeEventListener("abort", listener);
    expect(warnings.length).toBeGreaterThan(0);
  });

  it("many subscribers share one listener, removed with the last subscriber", async () => {
    const controller = new AbortController();
    const subscriptions = Array.from({ length: 100 }, () => subscribeAbort(controller.signal, () => undefined));
    expect(listeners(controller.signal)).toBe(1);
    for (const subscription of subscriptions.slice(0, 99)) subscription.cancel();
    expect(listeners(controller.signal)).toBe(1);
    subscriptions[99]?.cancel();
    subscriptions[99]?.cancel(); // idempotent
    expect(listeners(controller.signal)).toBe(0);
    // A new subscriber after that gets a fresh hub.
    const calls: unknown[] = [];
    const again = subscribeAbort(controller.signal, (reason) => calls.push(reason));
    expect(listeners(controller.signal)).toBe(1);
    controller.abort("why");
    expect(calls).toEqual(["why"]);
    expect(listeners(controller.signal)).toBe(0);
    again.cancel(); // harmless after firing
    await settle();
    expect(warnings).toEqual([]);
  });

  it("fans out in subscription order; a subscriber may cancel others or itself while it runs", () => {
    const controller = new AbortController();
    const calls: string[] = [];
    const subscriptions: Record<string, { cancel(): void }> = {};
    subscriptions.a = subscribeAbort(controller.signal, () => {
      calls.push("a");
      subscriptions.a?.cancel();
      subscriptions.c?.cancel();
    });
    subscriptions.b = subscribeAbort(controller.signal, () => {
      calls.push("b");
      subscriptions.d?.cancel();
      subscriptions.e?.cancel();
    });
    subscriptions.c = subscribeAbort(controller.signal, () => calls.push("c"));
    subscriptions.d = subscribeAbort(controller.signal, () => calls.push("d"));
    subscriptions.e = subscribeAbort(controller.signal, () => calls.push("e"));
    subscriptions.f = subscribeAbort(controller.signal, () => calls.push("f"));
    controller.abort();
    expect(calls).toEqual(["a", "b", "f"]);
    expect(listeners(controller.signal)).toBe(0);
  });

  it("on an already-aborted signal: called in a microtask unless cancelled first, no listener added", async () => {
    const controller = new AbortController();
    controller.abort("early");
    const calls: unknown[] = [];
    subscribeAbort(controller.signal, (reason) => calls.push(reason));
    subscribeAbort(controller.signal, () => calls.push("cancelled")).cancel();
    expect(calls).toEqual([]);
    expect(listeners(controller.signal)).toBe(0);
    await Promise.resolve();
    expect(calls).toEqual(["early"]);
  });

  it("onAnyAbort fires once, for the first signal, and leaves no listener on either", () => {
    const first = new AbortController();
    const second = new AbortController();
    const reasons: unknown[] = [];
    const unlisten = Array.from({ length: 30 }, () =>
      onAnyAbort([first.signal, undefined, second.signal], (reason) => reasons.push(reason)),
    );
    expect(listeners(first.signal)).toBe(1);
    expect(listeners(second.signal)).toBe(1);
    second.abort("second");
    first.abort("first");
    expect(reasons).toEqual(Array.from({ length: 30 }, () => "second"));
    expect(listeners(first.signal)).toBe(0);
    for (const stop of unlisten) stop();
  });

  it("CloseGate.race: 50 races on one signal add one listener and reject with its reason", async () => {
    const gate = new CloseGate();
    const controller = new AbortController();
    const races = Array.from({ length: 50 }, () => gate.race(new Promise<never>(() => undefined), controller.signal));
    expect(listeners(controller.signal)).toBe(1);
    const reason = new Error("gave up");
    controller.abort(reason);
    for (const race of races) await expect(race).rejects.toBe(reason);
    expect(listeners(controller.signal)).toBe(0);
    const done = new AbortController();
    expect(await Promise.all(Array.from({ length: 20 }, (_, i) => gate.race(Promise.resolve(i), done.signal)))).toEqual(
      Array.from({ length: 20 }, (_, i) => i),
    );
    expect(listeners(done.signal)).toBe(0);
    await settle();
    expect(warnings).toEqual([]);
  });
});

/**
 * 50 `lock`/`acquire` calls sharing one signal while `key` is held: no warning, at most one
 * listener on the signal meanwhile, all rejected with the reason on abort, none left afterwards.
 */
async function fiftyWaitersOnOneSignal(locker: Locker, settleMs: number): Promise<void> {
  const key = uniqueKey();
  const release = await locker.lock(undefined, key);
  const controller = new AbortController();
  const { signal } = controller;
  let maxListeners = 0;
  const sample = (): void => {
    maxListeners = Math.max(maxListeners, listeners(signal));
  };
  const calls = Array.from({ length: 50 }, (_, i) => {
    const call = i % 2 === 0 ? locker.lock(signal, key) : locker.acquire(signal, key);
    sample();
    return call.then(
      () => "acquired",
      (error: unknown) => error,
    );
  });
  const deadline = Date.now() + settleMs;
  while (Date.now() < deadline) {
    sample();
    await sleep(5);
  }
  await settle();
  expect(warnings).toEqual([]);
  expect(listeners(signal)).toBe(1);
  const reason = new Error("request cancelled");
  controller.abort(reason);
  const outcomes = await Promise.all(calls);
  for (const outcome of outcomes) expect(outcome).toBe(reason);
  await settle();
  expect(warnings).toEqual([]);
  expect(maxListeners).toBe(1);
  expect(listeners(signal)).toBe(0);
  // The key is still held by its holder, and free after its release.
  expect((await locker.tryLock(undefined, key))[0]).toBe(false);
  await release();
  await eventually(async () => {
    const [ok, release2] = await locker.tryLock(undefined, key);
    await release2();
    return ok;
  });
}

describe("50 concurrent calls sharing one AbortSignal", () => {
  it("MemoryLocker", async () => {
    const locker = new MemoryLocker();
    await fiftyWaitersOnOneSignal(locker, 20);
    expect(locker.heldCount).toBe(0);
    await locker.close();
  });

  describe("RedisLocker (real redis-server)", () => {
    let fixture: RedisFixture | undefined;
    beforeAll(async () => {
      fixture = await RedisFixture.start(1);
    });
    afterAll(async () => {
      await fixture?.stop();
    });

    it("one node", async () => {
      if (fixture === undefined) throw new Error("no fixture");
      // Every call has tried once, failed, and is parked in its wait by the end of the 300 ms.
      const locker = fixture.locker();
      await fiftyWaitersOnOneSignal(locker, 300);
      expect(locker.heldCount).toBe(0);
    });
  });
});
