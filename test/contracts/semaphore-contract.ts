/**
 * The counting-semaphore contract (DESIGN.md "Additions": semaphores) as one vitest suite, run
 * against every semaphore implementation. Semaphores are Lockers too: with `limit: 1` they also run
 * the lock contract (test/contracts/contract.ts); this suite covers what a limit above 1 and weights add.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Lease, type Locker, LockerClosedError, LockLostError, UnsupportedError } from "../../src/index.js";
import { wakeOnlyCrowd } from "../helpers/crowd.js";
import { overlappingHolders } from "../helpers/overlap.js";
import { eventually, sleep } from "../helpers/wait.js";
import { expectInvalid, uniqueKey, whenAborted } from "./contract.js";

export interface SemaphoreHarness {
  /** A new semaphore with `limit` (closed by `cleanup`). `wakeOnly`: its safety-net polling is so
   *  slow that only a release notification can wake a waiter in time. */
  create(options: { limit: number; wakeOnly?: boolean }): Promise<Locker>;
  /** A second semaphore on `locker`'s store, with the same limit (for Redis: new connections, like
   *  another process; for memory: the same instance, since its store is the instance). */
  peer(locker: Locker, options?: { wakeOnly?: boolean }): Promise<Locker>;
  /** Whether permits held by a semaphore closed without release (a crashed holder's stand-in) come
   *  back after their expiry (Redis). False where holding lives in the process (memory). */
  readonly expires: boolean;
  /** Closes every semaphore and connection the harness made. */
  cleanup(): Promise<void>;
}

/**
 * Counts the permits in use by the holders it is told about and remembers the peak, like the
 * torture suite's overlap counter: a holder calls `enter(weight)` once it holds and `leave(weight)`
 * before it releases.
 */
class PermitChecker {
  inUse = 0;
  peak = 0;
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  enter(weight: number): void {
    this.inUse += weight;
    this.peak = Math.max(this.peak, this.inUse);
    if (this.inUse > this.#limit) throw new Error(`limit ${this.#limit} exceeded: ${this.inUse} permits in use`);
  }

  leave(weight: number): void {
    this.inUse -= weight;
  }
}

/** A caller that acquires `weight` permits and records, in `order`, when it got in. */
async function enqueue(
  locker: Locker,
  key: string,
  weight: number,
  order: string[],
  label: string,
  signal: AbortSignal = AbortSignal.timeout(10_000),
): Promise<Lease> {
  const lease = await locker.acquire(signal, key, { weight });
  order.push(label);
  return lease;
}

/** Registers the semaphore contract suite for one implementation. */
export function semaphoreContract(name: string, setup: () => Promise<SemaphoreHarness>): void {
  describe(`Semaphore contract: ${name}`, () => {
    let harness: SemaphoreHarness;

    beforeAll(async () => {
      harness = await setup();
    });
    afterAll(async () => {
      await harness?.cleanup();
    });

    it("never exceeds the limit with mixed weights under concurrency, across two peers", async () => {
      const limit = 5;
      const a = await harness.create({ limit });
      const b = await harness.peer(a);
      const key = uniqueKey("sem");
      const checker = new PermitChecker(limit);
      const weights = [1, 2, 3, 1, 5, 2, 1, 4, 3, 1];
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const weight = weights[i % weights.length] as number;
          const locker = i % 2 === 0 ? a : b;
          const lease = await locker.acquire(AbortSignal.timeout(20_000), key, { weight });
          checker.enter(weight);
          await sleep(i % 3);
          checker.leave(weight);
          await lease.release();
        }),
      );
      expect(checker.inUse).toBe(0);
      expect(checker.peak).toBeLessThanOrEqual(limit);
      expect(checker.peak).toBeGreaterThan(1); // holders really overlapped
      const all = await a.tryAcquire(undefined, key, { weight: limit });
      expect(all).toBeDefined(); // every permit came back
      await all?.release();
    });

    it("six semaphores, three callers each of weights 1-3, looping on one key, all get through, woken by releases, within the limit", async () => {
      const limit = 4;
      const lockers = await wakeOnlyCrowd(await harness.create({ limit, wakeOnly: true }), 6, (of, options) =>
        harness.peer(of, options),
      );
      const key = uniqueKey("sem-crowd");
      const checker = new PermitChecker(limit);
      let sections = 0;
      await Promise.all(
        lockers.flatMap((locker) =>
          [1, 2, 3].map(async (weight) => {
            for (let section = 0; section < 3; section++) {
              const lease = await locker.acquire(AbortSignal.timeout(20_000), key, { weight });
              checker.enter(weight);
              await sleep(1);
              checker.leave(weight);
              sections += 1;
              await lease.release();
            }
          }),
        ),
      );
      expect(sections).toBe(54);
      expect(checker.peak).toBeLessThanOrEqual(limit);
    });

    it("respects weights: with limit 4, two weight-2 holders leave no room for weight 1", async () => {
      const a = await harness.create({ limit: 4 });
      const b = await harness.peer(a);
      const key = uniqueKey("sem");
      const first = await a.acquire(undefined, key, { weight: 2 });
      const light = await b.tryAcquire(undefined, key, { weight: 1 });
      expect(light).toBeDefined(); // 3 of 4 in use
      await light?.release();
      const second = await b.acquire(undefined, key, { weight: 2 });
      expect(await a.tryAcquire(undefined, key, { weight: 1 })).toBeUndefined();
      expect(await b.tryAcquire(undefined, key)).toBeUndefined();
      expect((await a.tryLock(undefined, key))[0]).toBe(false);
      await first.release();
      expect(await a.tryAcquire(undefined, key, { weight: 3 })).toBeUndefined();
      const again = await a.tryAcquire(undefined, key, { weight: 2 });
      expect(again).toBeDefined();
      await again?.release();
      await second.release();
    });

    it("is FIFO between weights: a heavy waiter queued first gets in before lighter ones behind it", async () => {
      const limit = 3;
      const s = await harness.create({ limit });
      const key = uniqueKey("sem");
      const holder = await s.acquire(undefined, key, { weight: 1 }); // 2 of 3 permits free
      const order: string[] = [];
      const heavy = enqueue(s, key, 3, order, "heavy");
      await sleep(50);
      const lights = [0, 1, 2].map(async (i) => {
        await sleep(i * 20);
        return enqueue(s, key, 1, order, `light${i}`);
      });
      await sleep(200);
      // The light waiters would fit, but they arrived after the heavy one: they wait behind it.
      expect(order).toEqual([]);
      expect(await s.tryAcquire(undefined, key, { weight: 1 })).toBeUndefined(); // no queue jumping
      await holder.release();
      const heavyLease = await heavy;
      expect(order).toEqual(["heavy"]);
      await sleep(50);
      expect(order).toEqual(["heavy"]);
      await heavyLease.release();
      const lightLeases = await Promise.all(lights);
      expect(order.slice(0, 1)).toEqual(["heavy"]);
      expect([...order.slice(1)].sort()).toEqual(["light0", "light1", "light2"]);
      await Promise.all(lightLeases.map((lease) => lease.release()));
    });

    it("a heavy waiter on a peer is not overtaken forever by a stream of overlapping light holders", async () => {
      const limit = 3;
      const s = await harness.create({ limit });
      const heavySide = await harness.peer(s);
      const key = uniqueKey("sem");
      const stream = overlappingHolders((signal) => s.acquire(signal, key, { weight: 1 }));
      await sleep(150); // the light holders overlap: the key is never free
      const started = performance.now();
      const heavy = await heavySide.acquire(AbortSignal.timeout(10_000), key, { weight: limit });
      const waited = performance.now() - started;
      await Promise.all([stream.stop(), heavy.release()]);
      expect(waited).toBeLessThan(5000);
    });

    it("wakes waiters on release, not on a polling interval (here and on a peer)", async () => {
      const s = await harness.create({ limit: 2, wakeOnly: true });
      const other = await harness.peer(s, { wakeOnly: true });
      const key = uniqueKey("sem");
      const full = await s.acquire(undefined, key, { weight: 2 });
      const here = s.acquire(AbortSignal.timeout(5000), key);
      await sleep(50);
      const there = other.acquire(AbortSignal.timeout(5000), key);
      await sleep(100); // both waiters have tried, failed and are parked on their (very long) backoff
      await full.release();
      // With polling only, these would take longer than the 5 s timeouts.
      const leases = await Promise.all([here, there]);
      await Promise.all(leases.map((lease) => lease.release()));
    });

    it("abort while queued leaves nothing behind and does not block the waiters behind it", async () => {
      const limit = 2;
      const s = await harness.create({ limit });
      const other = await harness.peer(s);
      const key = uniqueKey("sem");
      const holder = await s.acquire(undefined, key, { weight: 1 }); // 1 of 2 permits free
      const controller = new AbortController();
      const heavy = other.acquire(controller.signal, key, { weight: 2 });
      await sleep(50);
      const light = s.acquire(AbortSignal.timeout(10_000), key, { weight: 1 }); // fits, but queued behind
      await sleep(100);
      controller.abort();
      await expect(heavy).rejects.toBe(controller.signal.reason);
      const started = performance.now();
      const lightLease = await light; // gets in while the holder still holds
      expect(performance.now() - started).toBeLessThan(5000);
      holder.assertHeld();
      await Promise.all([holder.release(), lightLease.release()]);
      // No queued entry and no permit of the aborted caller remains: the call rejected at once,
      // and what its abandoned attempt or queue place left in the store is cleaned up in the
      // background, so the whole key becomes free (waited for, not assumed: a loaded machine
      // runs that clean-up after this line); a place or permit left behind for good fails it.
      await eventually(async () => {
        const all = await other.tryAcquire(undefined, key, { weight: limit });
        await all?.release();
        return all !== undefined;
      }, 2000);
    });

    it("many aborted waiters leave nothing behind", async () => {
      const s = await harness.create({ limit: 3 });
      const key = uniqueKey("sem");
      const full = await s.acquire(undefined, key, { weight: 3 });
      const controllers = Array.from({ length: 10 }, () => new AbortController());
      const waits = controllers.map((c, i) =>
        s.acquire(c.signal, key, { weight: 1 + (i % 3) }).catch((e: unknown) => e),
      );
      await sleep(50);
      for (const c of controllers) c.abort();
      for (const result of await Promise.all(waits)) expect(result).toBeInstanceOf(DOMException);
      await full.release();
      const all = await s.tryAcquire(undefined, key, { weight: 3 });
      expect(all).toBeDefined();
      await all?.release();
    });

    it("autoExtend: false permits come back after expiry", async () => {
      const s = await harness.create({ limit: 2 });
      const other = await harness.peer(s);
      const key = uniqueKey("sem");
      const started = performance.now();
      const lease = await s.acquire(undefined, key, { weight: 2, autoExtend: false, expiry: 300 });
      const early = await other.tryAcquire(undefined, key);
      if (early !== undefined) {
        // Only once the 300 ms lease ran out (a machine slow enough to take that long for one
        // call): then the rest of this test has nothing left to show.
        expect(performance.now() - started).toBeGreaterThanOrEqual(250);
        await early.release();
        return;
      }
      const waiting = other.acquire(AbortSignal.timeout(5000), key, { weight: 2 });
      const reason = await whenAborted(lease.lost);
      expect(reason).toBeInstanceOf(LockLostError);
      expect((reason as LockLostError).reason).toBe("expired");
      expect(performance.now() - started).toBeGreaterThanOrEqual(250);
      const next = await waiting;
      expect(await lease.releaseWithOutcome()).toBe("expired");
      expect(await s.tryAcquire(undefined, key)).toBeUndefined(); // the stale release left `next` alone
      expect(await next.releaseWithOutcome()).toBe("released");
    });

    it("a holder closed without release (a crash) gives its permits back after the expiry", async () => {
      if (!harness.expires) return; // memory: permits are held by the process, closing does not free them
      const crashed = await harness.create({ limit: 2 });
      const survivor = await harness.create({ limit: 2 });
      const key = uniqueKey("sem");
      await crashed.acquire(undefined, key, { weight: 2, expiry: 500 });
      await crashed.close(); // no release: it stops extending, like a process that died
      expect(await survivor.tryAcquire(undefined, key)).toBeUndefined();
      const started = performance.now();
      const lease = await survivor.acquire(AbortSignal.timeout(10_000), key, { weight: 2 });
      expect(performance.now() - started).toBeLessThan(5000);
      await lease.release();
    });

    it("fencing with limit > 1 is an UnsupportedError, thrown before anything is taken", async () => {
      const s = await harness.create({ limit: 3 });
      const key = uniqueKey("sem");
      await expect(s.acquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
      await expect(s.tryAcquire(undefined, key, { fencing: true, weight: 3 })).rejects.toBeInstanceOf(UnsupportedError);
      const all = await s.tryAcquire(undefined, key, { weight: 3 });
      expect(all).toBeDefined();
      await all?.release();
    });

    it('weight 0, limit + 1, 1.5 and "2" are InvalidArgumentErrors naming the value', async () => {
      const limit = 3;
      const s = await harness.create({ limit });
      const key = uniqueKey("sem");
      for (const weight of [0, limit + 1, 1.5, "2", -1, null]) {
        await expectInvalid(s.acquire(undefined, key, { weight: weight as number }), "options.weight", weight);
        await expectInvalid(s.tryAcquire(undefined, key, { weight: weight as number }), "options.weight", weight);
      }
      await expect(s.acquire(undefined, key, { weight: limit + 1 })).rejects.toThrow(
        new RegExp(`options\\.weight.*1 to ${limit}.*number ${limit + 1}`),
      );
      const all = await s.tryAcquire(undefined, key, { weight: limit });
      expect(all).toBeDefined(); // nothing was left half-acquired
      await all?.release();
    });

    it("close rejects queued waiters of every weight; releases still work and admit nobody closed", async () => {
      const s = await harness.create({ limit: 2 });
      const key = uniqueKey("sem");
      const held = await s.acquire(undefined, key, { weight: 1 });
      const waits = [2, 1].map((weight) => s.acquire(undefined, key, { weight }).catch((e: unknown) => e));
      await sleep(50);
      await s.close();
      for (const result of await Promise.all(waits)) expect(result).toBeInstanceOf(LockerClosedError);
      await expect(s.tryAcquire(undefined, key)).rejects.toBeInstanceOf(LockerClosedError);
      expect(await held.releaseWithOutcome()).toBe("released");
      const other = await harness.create({ limit: 2 });
      await eventually(async () => {
        const all = await other.tryAcquire(undefined, key, { weight: 2 });
        await all?.release();
        return all !== undefined;
      });
    });
  });
}
