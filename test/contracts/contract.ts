/**
 * The Locker contract (DESIGN.md rules 1-8) as one vitest suite, run against every implementation.
 * A harness creates lockers; for Redis, each locker gets its own connections, so two lockers of one
 * harness behave like two processes sharing a Redis.
 */
import { getEventListeners } from "node:events";
import { afterAll, afterEach, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import {
  InvalidArgumentError,
  type Lease,
  type Locker,
  LockerClosedError,
  LockLostError,
  lockAndDo,
  MAX_KEY_BYTES,
  tryLockAndDo,
  UnsupportedError,
} from "../../src/index.js";
import { wakeOnlyCrowd } from "../helpers/crowd.js";
import { untilWaiting } from "../helpers/wait.js";
import { leaseFeaturesContract } from "./lease-features-contract.js";

export interface LockerHarness {
  /** A new locker (closed by `cleanup`). `wakeOnly` asks for a locker whose safety-net polling is
   *  so slow that only a release notification can wake a waiter in time. */
  create(options?: { wakeOnly?: boolean }): Promise<Locker>;
  /** A second locker sharing `locker`'s store (for Redis: new connections, like another process;
   *  for memory: the same instance, since its store is the instance). */
  peer(locker: Locker, options?: { wakeOnly?: boolean }): Promise<Locker>;
  /** Whether `acquire(..., { fencing: true })` is supported (false: it must be an UnsupportedError). */
  readonly fencing: boolean;
  /**
   * Whether a lease handed off by a `create()` locker can be adopted by its `peer()` (false: both
   * `handOff` and `adopt` must be an UnsupportedError).
   */
  readonly handOff?: boolean;
  /** Closes every locker and connection the harness made. */
  cleanup(): Promise<void>;
}

let keyCounter = 0;
/** A key no other test uses. */
export function uniqueKey(label = "key"): string {
  keyCounter += 1;
  return `${label}-${process.pid}-${Date.now()}-${keyCounter}`;
}

/** Asserts that `promise` rejects with exactly `signal.reason` (read after the rejection). */
async function expectAbortReason(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  const error = await promise.then(
    () => new Error("expected a rejection"),
    (e: unknown) => e,
  );
  expect(signal.aborted).toBe(true);
  expect(error).toBe(signal.reason);
}

const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves with `signal.reason` once `signal` aborts (at once if it already has). */
export function whenAborted(signal: AbortSignal): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(signal.reason), { once: true }));
}

/** Asserts that `promise` rejects with an InvalidArgumentError about `argument` that holds `value`. */
export async function expectInvalid(promise: Promise<unknown>, argument: string, value: unknown): Promise<void> {
  const error = await promise.then(
    () => new Error("expected a rejection"),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidArgumentError);
  expect((error as InvalidArgumentError).argument).toBe(argument);
  expect((error as InvalidArgumentError).received).toBe(value);
}

/**
 * Bad values of the acquire options that every locker refuses with an InvalidArgumentError naming
 * them (before anything is taken). Weights above a locker's limit are tested per primitive.
 */
export const BAD_ACQUIRE_OPTIONS: ReadonlyArray<[option: "weight" | "autoExtend" | "expiry", value: unknown]> = [
  ["weight", 0],
  ["weight", -1],
  ["weight", 1.5],
  ["weight", "1"],
  ["weight", null],
  ["weight", Number.NaN],
  ["autoExtend", "no"],
  ["autoExtend", 0],
  ["autoExtend", null],
  ["expiry", 0],
  ["expiry", -300],
  ["expiry", 300.5],
  ["expiry", "300"],
  ["expiry", null],
];

/** Registers the contract suite for one Locker implementation. */
export function lockerContract(name: string, setup: () => Promise<LockerHarness>): void {
  describe(`Locker contract: ${name}`, () => {
    let harness: LockerHarness;
    let locker: Locker;

    beforeAll(async () => {
      harness = await setup();
    });
    afterAll(async () => {
      await harness?.cleanup();
    });
    afterEach(() => undefined);

    const fresh = async (options?: { wakeOnly?: boolean }): Promise<Locker> => {
      locker = await harness.create(options);
      return locker;
    };

    it("locks, times out a second lock, releases, locks again; the old release is then a no-op", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release1 = await l.lock(undefined, key);
      const timeout = AbortSignal.timeout(100);
      await expectAbortReason(l.lock(timeout, key), timeout);
      await release1();
      const release2 = await l.lock(undefined, key);
      await release1(); // no-op: must not free the second acquisition
      expect((await l.tryLock(undefined, key))[0]).toBe(false);
      await release2();
      expect((await l.tryLock(undefined, key))[0]).toBe(true);
    });

    it("tryLock: true, then false while held, then true after release", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const [ok1, release1] = await l.tryLock(undefined, key);
      expect(ok1).toBe(true);
      const [ok2, release2] = await l.tryLock(undefined, key);
      expect(ok2).toBe(false);
      await release2(); // release of a failed tryLock: a no-op
      expect((await l.tryLock(undefined, key))[0]).toBe(false);
      await release1();
      const [ok3, release3] = await l.tryLock(undefined, key);
      expect(ok3).toBe(true);
      await release3();
    });

    it("a waiter acquires after the holder releases", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      let acquired = false;
      const waiting = l.lock(undefined, key).then((r) => {
        acquired = true;
        return r;
      });
      await untilWaiting(l, 1);
      expect(acquired).toBe(false);
      await release();
      const release2 = await waiting;
      expect(acquired).toBe(true);
      await release2();
    });

    it("wakes a waiter on release, not on a polling interval", async () => {
      const l = await fresh({ wakeOnly: true });
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      // Below the 20 s safety-net poll of a wakeOnly locker, and far above a wake-up on a loaded machine.
      const waiting = l.lock(AbortSignal.timeout(15_000), key);
      await untilWaiting(l, 1); // the waiter has tried, failed and is now parked on its (very long) backoff
      await release();
      const release2 = await waiting; // with only polling, this would take 20 s
      await release2();
    });

    it("wakes a waiter of another locker (for Redis: another connection) on release", async () => {
      const holder = await fresh({ wakeOnly: true });
      const waiter = await harness.peer(holder, { wakeOnly: true });
      const key = uniqueKey();
      const release = await holder.lock(undefined, key);
      const waiting = waiter.lock(AbortSignal.timeout(15_000), key); // as above: below the 20 s poll
      await untilWaiting(waiter, 1);
      await release();
      const release2 = await waiting;
      await release2();
    });

    it("a waiter of another locker that gave up does not hold up the next one (its queue entry goes)", async () => {
      const holder = await fresh({ wakeOnly: true });
      const quitter = await harness.peer(holder, { wakeOnly: true });
      const waiter = await harness.peer(holder, { wakeOnly: true });
      const key = uniqueKey();
      const release = await holder.lock(undefined, key);
      const controller = new AbortController();
      const gaveUp = quitter.lock(controller.signal, key).catch((e: unknown) => e);
      await untilWaiting(quitter, 1);
      await tick(200); // its retry after subscribing has joined the store's queue, where there is one
      controller.abort();
      expect(await gaveUp).toBeInstanceOf(DOMException);
      // Below the 20 s poll (and etcd's 60 s lease) of wakeOnly lockers: a queue entry the quitter
      // left behind would keep this waiter out until then.
      const waiting = waiter.lock(AbortSignal.timeout(15_000), key);
      await untilWaiting(waiter, 1);
      await release();
      const release2 = await waiting;
      await release2();
    });

    it("a stale release after re-acquisition does not free the new holder", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const stale = await l.lock(undefined, key);
      await stale();
      const current = await l.lock(undefined, key);
      await stale();
      await Promise.all([stale(), stale()]);
      expect((await l.tryLock(undefined, key))[0]).toBe(false);
      await current();
    });

    it("50 concurrent lockAndDo keep a non-atomic counter exact; tryLockAndDo inside never runs", async () => {
      const l = await fresh();
      const key = uniqueKey();
      let counter = 0;
      let innerRuns = 0;
      const innerResults: unknown[] = [];
      await Promise.all(
        Array.from({ length: 50 }, () =>
          lockAndDo(l, undefined, key, async () => {
            const read = counter;
            await tick(0);
            innerResults.push(
              await tryLockAndDo(l, undefined, key, () => {
                innerRuns += 1;
                return "ran";
              }),
            );
            counter = read + 1;
          }),
        ),
      );
      expect(counter).toBe(50);
      expect(innerRuns).toBe(0);
      expect(innerResults).toEqual(Array.from({ length: 50 }, () => [false, undefined]));
    });

    it("is exclusive across lockers (for Redis: across connections)", async () => {
      const a = await fresh();
      const b = await harness.peer(a);
      const key = uniqueKey();
      const release = await a.lock(undefined, key);
      expect((await b.tryLock(undefined, key))[0]).toBe(false);
      const waiting = b.lock(AbortSignal.timeout(10_000), key);
      await untilWaiting(b, 1);
      await release();
      const releaseB = await waiting;
      expect((await a.tryLock(undefined, key))[0]).toBe(false);
      await releaseB();
    });

    it("eight lockers of one store, two callers each, on one key all get through, woken by releases, never two at once", async () => {
      const lockers = await wakeOnlyCrowd(await fresh({ wakeOnly: true }), 8, (of, options) =>
        harness.peer(of, options),
      );
      const key = uniqueKey("crowd");
      let inside = 0;
      let overlaps = 0;
      const done = lockers.map(() => 0);
      await Promise.all(
        lockers.flatMap((l, index) =>
          [0, 1].map(async () => {
            for (let section = 0; section < 3; section++) {
              const release = await l.lock(AbortSignal.timeout(20_000), key);
              inside += 1;
              if (inside > 1) overlaps += 1;
              await tick(1);
              inside -= 1;
              done[index] = (done[index] ?? 0) + 1;
              await release();
            }
          }),
        ),
      );
      expect(overlaps).toBe(0);
      expect(done).toEqual(lockers.map(() => 6));
    });

    it("is not re-entrant: a second lock from the same caller waits", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      const signal = AbortSignal.timeout(80);
      await expectAbortReason(l.lock(signal, key), signal);
      await release();
    });

    it("rejects at once on an already-aborted signal, with the signal's reason", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const controller = new AbortController();
      const reason = new Error("caller gave up");
      controller.abort(reason);
      await expect(l.lock(controller.signal, key)).rejects.toBe(reason);
      await expect(l.tryLock(controller.signal, key)).rejects.toBe(reason);
      await expect(lockAndDo(l, controller.signal, key, () => 1)).rejects.toBe(reason);
      expect((await l.tryLock(undefined, key))[0]).toBe(true);
    });

    it("abort while waiting rejects, leaves no listener, and leaks no lock", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      const controller = new AbortController();
      const waiting = l.lock(controller.signal, key);
      await untilWaiting(l, 1);
      controller.abort();
      await expectAbortReason(waiting, controller.signal);
      expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
      await release();
      const [ok, release2] = await l.tryLock(undefined, key);
      expect(ok).toBe(true);
      await release2();
    });

    it("many aborted waiters leave nothing behind and do not block the next waiter", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      const controllers = Array.from({ length: 20 }, () => new AbortController());
      const waits = controllers.map((c) => l.lock(c.signal, key).catch((e: unknown) => e));
      const survivor = l.lock(AbortSignal.timeout(10_000), key);
      await untilWaiting(l, 21);
      for (const c of controllers) c.abort();
      for (const result of await Promise.all(waits)) expect(result).toBeInstanceOf(DOMException);
      await release();
      const release2 = await survivor;
      await release2();
      expect((await l.tryLock(undefined, key))[0]).toBe(true);
    });

    it("serves waiters of one locker in arrival order", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      const order: number[] = [];
      const waits: Array<Promise<void>> = [];
      for (const i of [0, 1, 2, 3, 4]) {
        // Each arrives once the one before it is observably waiting.
        waits.push(
          l.lock(AbortSignal.timeout(20_000), key).then(async (r) => {
            order.push(i);
            await r();
          }),
        );
        await untilWaiting(l, i + 1);
      }
      await release();
      await Promise.all(waits);
      expect(order).toEqual([0, 1, 2, 3, 4]);
    });

    it("release is idempotent under concurrent calls and never rejects", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      const results = await Promise.allSettled([release(), release(), release()]);
      expect(results.every((r) => r.status === "fulfilled")).toBe(true);
      expect((await l.tryLock(undefined, key))[0]).toBe(true);
    });

    it("supports `await using`", async () => {
      const l = await fresh();
      const key = uniqueKey();
      {
        await using _held = await l.lock(undefined, key);
        expect((await l.tryLock(undefined, key))[0]).toBe(false);
      }
      const [ok, release] = await l.tryLock(undefined, key);
      expect(ok).toBe(true);
      await release();
    });

    it("lockAndDo releases when the callback throws and passes its result through", async () => {
      const l = await fresh();
      const key = uniqueKey();
      await expect(
        lockAndDo(l, undefined, key, () => {
          throw new Error("boom");
        }),
      ).rejects.toThrow("boom");
      expect(await lockAndDo(l, undefined, key, async () => 42)).toBe(42);
      expect(await tryLockAndDo(l, undefined, key, () => "x")).toEqual([true, "x"]);
    });

    it("close: refuses new calls, rejects waiters, is idempotent; releases still work", async () => {
      const l = await fresh();
      const key = uniqueKey();
      const release = await l.lock(undefined, key);
      const waiting = l.lock(undefined, key).catch((e: unknown) => e);
      await untilWaiting(l, 1); // observed before close
      await l.close();
      expect(await waiting).toBeInstanceOf(LockerClosedError);
      await expect(l.lock(undefined, key)).rejects.toBeInstanceOf(LockerClosedError);
      await expect(l.tryLock(undefined, uniqueKey())).rejects.toBeInstanceOf(LockerClosedError);
      await l.close();
      await expect(release()).resolves.toBeUndefined();
      const other = await harness.create();
      const [ok, release2] = await other.tryLock(undefined, key);
      expect(ok).toBe(true);
      await release2();
    });

    describe("leases", () => {
      it("acquire gives a lease that is held until released, then reports what the release found", async () => {
        const l = await fresh();
        const key = uniqueKey();
        const lease = await l.acquire(undefined, key);
        expect(lease.key).toBe(key);
        expect(lease.lost.aborted).toBe(false);
        expect(lease.fencingToken).toBeUndefined();
        lease.assertHeld();
        expect((await l.tryLock(undefined, key))[0]).toBe(false);
        expect(await lease.releaseWithOutcome()).toBe("released");
        expect(await lease.releaseWithOutcome()).toBe("released"); // once only, same answer
        await lease.release();
        expect(() => lease.assertHeld()).toThrow(LockLostError);
        expect(() => lease.assertHeld()).toThrow(/released/);
        expect((await l.tryLock(undefined, key))[0]).toBe(true);
      });

      it("a stale release does not touch the next holder; other leases release independently", async () => {
        const l = await fresh();
        const key = uniqueKey();
        const lease = await l.acquire(undefined, key);
        const [, release] = await l.tryLock(undefined, key); // no-op release of a failed try
        await release();
        await lease.release();
        const next = await l.acquire(undefined, key);
        const stale = await l.acquire(undefined, uniqueKey());
        expect(await stale.releaseWithOutcome()).toBe("released");
        expect((await l.tryLock(undefined, key))[0]).toBe(false);
        await next.release();
      });

      it("supports `await using` on a lease and waits like lock", async () => {
        const l = await fresh();
        const key = uniqueKey();
        {
          await using _lease = await l.acquire(undefined, key);
          const signal = AbortSignal.timeout(50);
          await expectAbortReason(l.acquire(signal, key), signal);
        }
        expect((await l.tryLock(undefined, key))[0]).toBe(true);
      });

      it("issues fencing tokens that rise with every grant of a key (or refuses with a typed error)", async () => {
        const l = await fresh();
        const key = uniqueKey();
        if (!harness.fencing) {
          await expect(l.acquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
          expect((await l.tryLock(undefined, key))[0]).toBe(true); // nothing was left half-acquired
          return;
        }
        const tokens: bigint[] = [];
        for (let i = 0; i < 5; i++) {
          const lease = await l.acquire(undefined, key, { fencing: true });
          expect(typeof lease.fencingToken).toBe("bigint");
          tokens.push(lease.fencingToken as bigint);
          await lease.release();
        }
        for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as bigint);
        const other = await harness.peer(l);
        const lease = await other.acquire(undefined, key, { fencing: true });
        expect(lease.fencingToken).toBeGreaterThan(tokens[tokens.length - 1] as bigint);
        await lease.release();
      });

      it("rejects bad acquire options", async () => {
        const l = await fresh();
        await expect(l.acquire(undefined, uniqueKey(), "x" as never)).rejects.toThrow(/options.*string "x"/);
        await expect(l.acquire(undefined, uniqueKey(), { fencing: 1 as never })).rejects.toThrow(
          /options\.fencing.*boolean.*number 1/,
        );
      });
    });

    describe("tryAcquire and acquire options", () => {
      it("tryAcquire: a lease when free, undefined while held (here or by a peer), a lease after release", async () => {
        const l = await fresh();
        const other = await harness.peer(l);
        const key = uniqueKey();
        const lease = await l.tryAcquire(undefined, key);
        expect(lease).toBeDefined();
        expect(lease?.key).toBe(key);
        expect(lease?.lost.aborted).toBe(false);
        lease?.assertHeld();
        expect(await l.tryAcquire(undefined, key)).toBeUndefined();
        expect(await other.tryAcquire(undefined, key)).toBeUndefined();
        expect((await l.tryLock(undefined, key))[0]).toBe(false);
        expect(await lease?.releaseWithOutcome()).toBe("released");
        const again = await other.tryAcquire(undefined, key);
        expect(again?.key).toBe(key);
        expect(await l.tryAcquire(undefined, key)).toBeUndefined();
        await again?.release();
      });

      it("tryAcquire rejects at once on an aborted signal and refuses bad input like acquire", async () => {
        const l = await fresh();
        const key = uniqueKey();
        const controller = new AbortController();
        controller.abort(new Error("gave up"));
        await expect(l.tryAcquire(controller.signal, key)).rejects.toBe(controller.signal.reason);
        await expectInvalid(l.tryAcquire(undefined, ""), "key", "");
        await expectInvalid(l.tryAcquire(undefined, key, { fencing: "yes" as never }), "options.fencing", "yes");
        const lease = await l.tryAcquire(undefined, key);
        expect(lease).toBeDefined();
        await lease?.release();
      });

      it("tryAcquire with fencing issues a rising token (or refuses with a typed error)", async () => {
        const l = await fresh();
        const key = uniqueKey();
        if (!harness.fencing) {
          await expect(l.tryAcquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
          expect((await l.tryLock(undefined, key))[0]).toBe(true);
          return;
        }
        const first = await l.tryAcquire(undefined, key, { fencing: true });
        expect(typeof first?.fencingToken).toBe("bigint");
        await first?.release();
        const second = await l.acquire(undefined, key, { fencing: true });
        expect(second.fencingToken).toBeGreaterThan(first?.fencingToken as bigint);
        await second.release();
      });

      it("lockAndDo passes the lease to fn, released once fn is done", async () => {
        const l = await fresh();
        const key = uniqueKey();
        let seen: Lease | undefined;
        const result = await lockAndDo(l, undefined, key, (lease) => {
          seen = lease;
          expect(lease.key).toBe(key);
          expect(lease.lost).toBeInstanceOf(AbortSignal);
          expect(lease.lost.aborted).toBe(false);
          lease.assertHeld();
          return lease.key.length;
        });
        expect(result).toBe(key.length);
        expect(() => seen?.assertHeld()).toThrow(LockLostError);
        expect((await l.tryLock(undefined, key))[0]).toBe(true);
      });

      it("tryLockAndDo resolves to [true, T] | [false, undefined], so `if (ok)` narrows", async () => {
        const l = await fresh();
        const key = uniqueKey();
        const ran = await tryLockAndDo(l, undefined, key, (lease) => lease.key.length);
        expectTypeOf(ran).toEqualTypeOf<[true, number] | [false, undefined]>();
        const [ok, value] = ran;
        if (ok) {
          expectTypeOf(value).toEqualTypeOf<number>();
          expect(value).toBe(key.length);
        } else {
          expectTypeOf(value).toEqualTypeOf<undefined>();
          throw new Error("expected the free key to be taken");
        }
        const release = await l.lock(undefined, key);
        let runs = 0;
        const missed = await tryLockAndDo(l, undefined, key, () => {
          runs += 1;
          return "ran";
        });
        expect(missed).toEqual([false, undefined]);
        expect(runs).toBe(0);
        await release();
      });

      // The next three tests mostly wait for leases to run out or be extended: they wait together
      // (vitest runs adjacent concurrent tests at once), each on its own key and lockers.
      it.concurrent('autoExtend: false expires on time: lost aborts with "expired", another caller gets in, release says expired', async () => {
        const l = await fresh();
        const other = await harness.peer(l);
        const key = uniqueKey();
        const started = performance.now();
        const lease = await l.acquire(undefined, key, { autoExtend: false, expiry: 300 });
        lease.assertHeld();
        expect(await other.tryAcquire(undefined, key)).toBeUndefined();
        const waiting = other.acquire(AbortSignal.timeout(5000), key);
        const reason = await whenAborted(lease.lost);
        const lostAfter = performance.now() - started;
        expect(reason).toBeInstanceOf(LockLostError);
        expect((reason as LockLostError).reason).toBe("expired");
        expect(lostAfter).toBeGreaterThanOrEqual(250);
        expect(lostAfter).toBeLessThan(2000);
        expect(() => lease.assertHeld()).toThrow(LockLostError);
        const next = await waiting;
        expect(performance.now() - started).toBeLessThan(4000);
        expect(await lease.releaseWithOutcome()).toBe("expired");
        // The stale release left the next holder alone.
        expect(await l.tryAcquire(undefined, key)).toBeUndefined();
        expect(await next.releaseWithOutcome()).toBe("released");
      });

      it.concurrent("autoExtend: false released before expiry is released, and nothing expires later", async () => {
        const l = await fresh();
        const key = uniqueKey();
        // Long enough that a loaded machine's delays (a quorum's acquire and release) fit in it.
        const lease = await l.acquire(undefined, key, { autoExtend: false, expiry: 1000 });
        expect(await lease.releaseWithOutcome()).toBe("released");
        const next = await l.acquire(undefined, key);
        await tick(1200);
        expect(lease.lost.aborted).toBe(false);
        next.assertHeld();
        expect(await l.tryAcquire(undefined, key)).toBeUndefined();
        await next.release();
      });

      it.concurrent("an auto-extended lease with its own short expiry stays held past it", async () => {
        const l = await fresh();
        const key = uniqueKey();
        const peer = await harness.peer(l);
        // Short next to the locker's own expiry (30 s), yet long enough that a loaded machine's
        // delays do not make an extension late; held past it by a quarter (two extensions, at
        // about 1 s and 2 s: the lease would have ended at 2 s without them).
        const lease = await l.acquire(undefined, key, { expiry: 2000 });
        await tick(2500);
        expect(await peer.tryAcquire(undefined, key)).toBeUndefined();
        expect(lease.lost.aborted).toBe(false);
        lease.assertHeld();
        expect(await lease.releaseWithOutcome()).toBe("released");
      });

      it("weight: 2 on a lock is an InvalidArgumentError naming 2, and nothing is taken", async () => {
        const l = await fresh();
        const key = uniqueKey();
        await expectInvalid(l.acquire(undefined, key, { weight: 2 }), "options.weight", 2);
        await expectInvalid(l.tryAcquire(undefined, key, { weight: 2 }), "options.weight", 2);
        await expect(l.acquire(undefined, key, { weight: 2 })).rejects.toThrow(/options\.weight.*number 2/);
        const lease = await l.tryAcquire(undefined, key, { weight: 1 });
        expect(lease).toBeDefined();
        await lease?.release();
      });

      for (const [option, value] of BAD_ACQUIRE_OPTIONS) {
        it(`${option}: ${typeof value} ${String(value)} is an InvalidArgumentError naming it`, async () => {
          const l = await fresh();
          const key = uniqueKey();
          const options = { autoExtend: false, expiry: 1000, [option]: value };
          await expectInvalid(l.acquire(undefined, key, options), `options.${option}`, value);
          await expectInvalid(l.tryAcquire(undefined, key, options), `options.${option}`, value);
          expect((await l.tryLock(undefined, key))[0]).toBe(true); // nothing was left half-acquired
        });
      }
    });

    describe("rejects bad input with a typed error naming the value", () => {
      const badKeys: Array<[string, unknown, RegExp]> = [
        ["an empty key", "", /key.*string "" \(length 0\)/],
        ["a number key", 42, /key.*number 42/],
        ["an undefined key", undefined, /key.*undefined/],
        ["an oversized key", "k".repeat(MAX_KEY_BYTES + 1), new RegExp(`key.*length ${MAX_KEY_BYTES + 1}`)],
        ["an oversized multibyte key", "é".repeat(MAX_KEY_BYTES / 2 + 1), /key.*UTF-8 bytes/],
      ];
      for (const [label, key, message] of badKeys) {
        it(label, async () => {
          const l = await fresh();
          for (const call of [
            () => l.lock(undefined, key as string),
            () => l.tryLock(undefined, key as string),
            () => lockAndDo(l, undefined, key as string, () => 1),
            () => tryLockAndDo(l, undefined, key as string, () => 1),
          ]) {
            const error = await call().catch((e: unknown) => e);
            expect(error).toBeInstanceOf(InvalidArgumentError);
            expect((error as Error).message).toMatch(message);
            expect((error as InvalidArgumentError).received).toBe(key);
          }
        });
      }

      it("a signal that is not an AbortSignal", async () => {
        const l = await fresh();
        const key = uniqueKey();
        for (const bad of [{ aborted: false }, "signal", null]) {
          await expect(l.lock(bad as AbortSignal, key)).rejects.toThrow(/signal.*AbortSignal/);
          await expect(l.tryLock(bad as AbortSignal, key)).rejects.toBeInstanceOf(InvalidArgumentError);
        }
        expect((await l.tryLock(undefined, key))[0]).toBe(true);
      });

      it("a callback that is not a function, before anything is locked", async () => {
        const l = await fresh();
        const key = uniqueKey();
        await expect(lockAndDo(l, undefined, key, "nope" as never)).rejects.toThrow(/fn.*function.*string "nope"/);
        await expect(tryLockAndDo(l, undefined, key, 7 as never)).rejects.toBeInstanceOf(InvalidArgumentError);
        expect((await l.tryLock(undefined, key))[0]).toBe(true);
      });
    });

    leaseFeaturesContract(() => harness, fresh);
  });
}
