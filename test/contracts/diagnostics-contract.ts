/**
 * What every locker publishes on the diagnostics channels (src/diagnostics.ts) for every way a
 * call can end, as one vitest suite per locker kind: run by diagnostics.test.ts (memory and Redis
 * lockers) and diagnostics-stores.test.ts (file, PostgreSQL and combined lockers).
 */
import { describe, expect, it } from "vitest";
import { type Lease, type Locker, LockerClosedError, type LockerKind } from "../../src/index.js";
import { recording, waitingCount } from "../helpers/diagnostics-recorder.js";
import { eventually, sleep } from "../helpers/wait.js";
import { uniqueKey } from "./contract.js";

/** A locker under test and a way to make a key unavailable to it (by another holder). */
export interface Setup {
  readonly locker: Locker;
  block(key: string): Promise<Lease>;
}

export interface Subject {
  readonly kind: LockerKind;
  /** Weight of an acquisition that takes everything (a semaphore's limit), else 1. */
  readonly weight: number;
  /**
   * The blocker holds the key in this very locker (a MemoryLocker blocks itself): a `tryLock` is
   * then answered without asking the store, with 0 attempts, as on every core locker.
   */
  readonly heldHere?: boolean;
  setup(): Setup;
}

/** The suite, once per subject. */
export function diagnosticsContract(subjects: readonly Subject[]): void {
  describe.each(subjects)("$kind", ({ kind, weight, heldHere, setup }) => {
    it("lock: start, end, asyncStart, asyncEnd, filled in as things become known; its release", async () => {
      const { locker } = setup();
      const key = uniqueKey();
      let release: (() => Promise<void>) | undefined;
      const recorder = await recording(async () => {
        release = await locker.lock(undefined, key);
        await release();
      });
      const events = recorder.acquiresOf(locker);
      expect(events.map((e) => e.event)).toEqual(["start", "end", "asyncStart", "asyncEnd"]);
      const [start, , asyncStart, asyncEnd] = events;
      expect(start).toMatchObject({ key, kind, mode: "lock", weight: 1, attempts: 0 });
      expect(start?.waitedMs).toBeUndefined();
      expect(start?.outcome).toBeUndefined();
      expect(start?.locker).toBe(locker);
      expect(asyncStart).toMatchObject({ outcome: "acquired", attempts: 1 });
      expect(asyncEnd).toMatchObject({ key, kind, mode: "lock", weight: 1, outcome: "acquired", attempts: 1 });
      expect(asyncEnd?.result).toBe(release);
      expect(asyncEnd?.waitedMs).toBeGreaterThanOrEqual(0);
      const releases = recorder.releases.filter((m) => m.locker === locker);
      expect(releases).toHaveLength(1);
      expect(releases[0]).toMatchObject({ key, kind, outcome: "released" });
      expect(releases[0]?.heldMs).toBeGreaterThanOrEqual(0);
    });

    it("acquire and tryAcquire with options: the weight is known at end, not at start", async () => {
      const { locker } = setup();
      const key = uniqueKey();
      const leases: Lease[] = [];
      const recorder = await recording(async () => {
        const lease = await locker.acquire(undefined, key, { weight });
        leases.push(lease);
        expect(await lease.releaseWithOutcome()).toBe("released");
        const second = await locker.tryAcquire(undefined, key, { weight });
        if (second === undefined) throw new Error("tryAcquire of a free key failed");
        leases.push(second);
        await second.release();
      });
      for (const [index, mode] of (["acquire", "tryAcquire"] as const).entries()) {
        const events = recorder.acquiresOf(locker, mode);
        expect(events.map((e) => e.event)).toEqual(["start", "end", "asyncStart", "asyncEnd"]);
        expect(events[0]?.weight).toBeUndefined();
        expect(events[1]?.weight).toBe(weight);
        expect(events[3]).toMatchObject({ key, kind, mode, weight, outcome: "acquired", attempts: 1 });
        expect(events[3]?.result).toBe(leases[index]);
      }
      expect(recorder.releases.filter((m) => m.locker === locker).map((m) => m.outcome)).toEqual([
        "released",
        "released",
      ]);
    });

    it("tryLock and tryAcquire of a taken key: not-acquired, and the no-op release publishes nothing", async () => {
      const { locker, block } = setup();
      const key = uniqueKey();
      const blocker = await block(key);
      const recorder = await recording(async (live) => {
        const [acquired, release] = await locker.tryLock(undefined, key);
        expect(acquired).toBe(false);
        const published = live.releases.length;
        await release();
        expect(live.releases.length).toBe(published);
        expect(await locker.tryAcquire(undefined, key)).toBeUndefined();
        await blocker.release();
      });
      const outcomes = recorder.outcomesOf(locker);
      const attempts = heldHere === true ? 0 : 1;
      expect(outcomes.map((e) => [e.mode, e.outcome, e.attempts])).toEqual([
        ["tryLock", "not-acquired", attempts],
        ["tryAcquire", "not-acquired", attempts],
      ]);
      expect(outcomes[0]?.result).toEqual([false, expect.any(Function)]);
      expect(outcomes[1]?.result).toBeUndefined();
      // Only the blocker's release (and its members', for a CombinedLocker), all granted before
      // anyone listened: no hold time.
      const released = recorder.releases.filter((m) => m.key === key);
      expect(released.length).toBeGreaterThanOrEqual(1);
      for (const message of released) expect(message).toMatchObject({ outcome: "released", heldMs: undefined });
    });

    it("a waiter handed the key: waitedMs covers the wait; waitingCount rises and falls", async () => {
      const { locker, block } = setup();
      const key = uniqueKey();
      const blocker = await block(key);
      const recorder = await recording(async () => {
        expect(waitingCount(locker)).toBe(0);
        const waiting = locker.lock(undefined, key);
        await eventually(() => waitingCount(locker) === 1, 3000);
        await sleep(100);
        expect(waitingCount(locker)).toBe(1);
        await blocker.release();
        const release = await waiting;
        expect(waitingCount(locker)).toBe(0);
        await release();
      });
      const [outcome] = recorder.outcomesOf(locker);
      expect(outcome).toMatchObject({ key, kind, mode: "lock", outcome: "acquired" });
      expect(outcome?.waitedMs).toBeGreaterThanOrEqual(95);
      expect(outcome?.attempts).toBeGreaterThanOrEqual(1);
    });

    it("aborted while waiting and before the call: error, then asyncStart and asyncEnd", async () => {
      const { locker, block } = setup();
      const key = uniqueKey();
      const blocker = await block(key);
      const controller = new AbortController();
      const early = AbortSignal.abort(new Error("aborted before the call"));
      const recorder = await recording(async () => {
        const waiting = locker.acquire(controller.signal, key);
        await eventually(() => waitingCount(locker) === 1, 3000);
        controller.abort(new Error("gave up"));
        await expect(waiting).rejects.toBe(controller.signal.reason);
        expect(waitingCount(locker)).toBe(0);
        await expect(locker.lock(early, key)).rejects.toBe(early.reason);
      });
      await blocker.release();
      const waited = recorder.acquiresOf(locker, "acquire");
      expect(waited.map((e) => e.event)).toEqual(["start", "end", "error", "asyncStart", "asyncEnd"]);
      expect(waited[2]).toMatchObject({ outcome: "aborted", weight: 1 });
      expect(waited[2]?.error).toBe(controller.signal.reason);
      const refused = recorder.acquiresOf(locker, "lock");
      expect(refused.map((e) => e.event)).toEqual(["start", "end", "error", "asyncStart", "asyncEnd"]);
      expect(refused[4]).toMatchObject({ outcome: "aborted", attempts: 0 });
      expect(refused[4]?.error).toBe(early.reason);
    });

    it("closed: a waiter when the locker closes, and a call after close", async () => {
      const { locker, block } = setup();
      const key = uniqueKey();
      const blocker = await block(key);
      const recorder = await recording(async () => {
        const waiting = locker.lock(undefined, key);
        const rejected = expect(waiting).rejects.toBeInstanceOf(LockerClosedError);
        await eventually(() => waitingCount(locker) === 1, 3000);
        await locker.close();
        await rejected;
        await expect(locker.tryAcquire(undefined, key)).rejects.toBeInstanceOf(LockerClosedError);
      });
      await blocker.release();
      expect(recorder.outcomesOf(locker).map((e) => [e.mode, e.outcome])).toEqual([
        ["lock", "closed"],
        ["tryAcquire", "closed"],
      ]);
      expect(recorder.outcomesOf(locker)[1]?.error).toBeInstanceOf(LockerClosedError);
    });
  });
}
