/**
 * The multi-key lock contract (DESIGN.md "Additions": `lockAll`/`tryLockAll`) as one vitest suite,
 * run over any Locker. Kept out of a `*.test.ts` file so that a Redis test file can import it
 * without running the memory suites again.
 */
import { getEventListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidArgumentError, lockAll, tryLockAll } from "../../src/index.js";
import { wakeOnlyCrowd } from "../helpers/crowd.js";
import { sleep } from "../helpers/wait.js";
import { type LockerHarness, uniqueKey } from "./contract.js";

/** Registers the `lockAll`/`tryLockAll` suite over the lockers of one harness. */
export function lockAllSuite(name: string, setup: () => Promise<LockerHarness>): void {
  describe(`lockAll: ${name}`, () => {
    let harness: LockerHarness;

    beforeAll(async () => {
      harness = await setup();
    });
    afterAll(async () => {
      await harness?.cleanup();
    });

    // A deadlock fails a round by its own 10 s signal; the test's timeout only has to let 200 rounds
    // finish on a loaded machine (a few seconds on a quiet one).
    it("two callers passing reversed key orders 100 times never deadlock and never overlap", {
      timeout: 120_000,
    }, async () => {
      const a = await harness.create();
      const b = await harness.peer(a);
      const keys = [uniqueKey("all-a"), uniqueKey("all-b"), uniqueKey("all-c")];
      let holders = 0;
      let rounds = 0;
      const caller = async (locker: typeof a, order: readonly string[]): Promise<void> => {
        for (let i = 0; i < 100; i++) {
          // Generous: a deadlock would never finish; a round normally takes well under a second.
          const release = await lockAll(locker, AbortSignal.timeout(10_000), order);
          holders += 1;
          expect(holders).toBe(1);
          if (i % 10 === 0) await sleep(1);
          holders -= 1;
          rounds += 1;
          await release();
        }
      };
      await Promise.all([caller(a, keys), caller(b, [...keys].reverse())]);
      expect(rounds).toBe(200);
      for (const key of keys) {
        const [ok, release] = await a.tryLock(undefined, key);
        expect(ok).toBe(true);
        await release();
      }
    });

    it("six lockers, two callers each, taking overlapping pairs of four keys, all get through, woken by releases, one holder per key", async () => {
      const lockers = await wakeOnlyCrowd(await harness.create({ wakeOnly: true }), 6, (of, options) =>
        harness.peer(of, options),
      );
      const keys = [uniqueKey("all-w"), uniqueKey("all-x"), uniqueKey("all-y"), uniqueKey("all-z")];
      const holders = new Map<string, number>(keys.map((key) => [key, 0]));
      let breaches = 0;
      let rounds = 0;
      await Promise.all(
        lockers.flatMap((locker, index) =>
          [0, 1].map(async (caller) => {
            for (let round = 0; round < 3; round++) {
              // Pairs that overlap, in either order.
              const at = (index + caller + round) % keys.length;
              const pair = [keys[at], keys[(at + 1 + caller) % keys.length]] as string[];
              const release = await lockAll(
                locker,
                AbortSignal.timeout(20_000),
                round % 2 === 0 ? pair : pair.reverse(),
              );
              for (const key of pair) {
                const count = (holders.get(key) ?? 0) + 1;
                holders.set(key, count);
                if (count > 1) breaches += 1;
              }
              await sleep(1);
              for (const key of pair) holders.set(key, (holders.get(key) ?? 1) - 1);
              rounds += 1;
              await release();
            }
          }),
        ),
      );
      expect(breaches).toBe(0);
      expect(rounds).toBe(36);
    });

    it("ignores duplicates and releases every key with one idempotent release", async () => {
      const l = await harness.create();
      const [k1, k2] = [uniqueKey("all"), uniqueKey("all")];
      // Locks are not re-entrant: taking k1 twice would wait forever.
      const release = await lockAll(l, AbortSignal.timeout(5000), [k1, k2, k1, k1]);
      expect((await l.tryLock(undefined, k1))[0]).toBe(false);
      expect((await l.tryLock(undefined, k2))[0]).toBe(false);
      const results = await Promise.allSettled([release(), release()]);
      expect(results.every((r) => r.status === "fulfilled")).toBe(true);
      await release();
      for (const key of [k1, k2]) {
        const [ok, again] = await l.tryLock(undefined, key);
        expect(ok).toBe(true);
        await again();
      }
    });

    it("supports `await using`", async () => {
      const l = await harness.create();
      const keys = [uniqueKey("all"), uniqueKey("all")];
      {
        await using _held = await lockAll(l, undefined, keys);
        expect((await l.tryLock(undefined, keys[1] as string))[0]).toBe(false);
      }
      const [ok, release] = await tryLockAll(l, undefined, keys);
      expect(ok).toBe(true);
      await release();
    });

    it("rejects bad input with an InvalidArgumentError, before anything is locked", async () => {
      const l = await harness.create();
      const good = uniqueKey("all");
      const cases: Array<[unknown, string]> = [
        [[], "keys"],
        ["abc", "keys"],
        [undefined, "keys"],
        [new Set([good]), "keys"],
        [[good, ""], "key"],
        [[good, 42], "key"],
        // biome-ignore lint/suspicious/noSparseArray: a hole is a missing key
        [[good, , good], "key"],
      ];
      for (const [keys, argument] of cases) {
        for (const call of [lockAll, tryLockAll]) {
          const error = await call(l, undefined, keys as string[]).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(InvalidArgumentError);
          expect((error as InvalidArgumentError).argument).toBe(argument);
        }
      }
      await expect(lockAll(l, "signal" as never, [good])).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(lockAll({} as never, undefined, [good])).rejects.toThrow(/locker.*a Locker/);
      const [ok, release] = await l.tryLock(undefined, good);
      expect(ok).toBe(true);
      await release();
    });

    it("abort while waiting for the 2nd key releases the 1st (another caller takes it at once)", async () => {
      const l = await harness.create();
      const other = await harness.peer(l);
      const [first, second] = [uniqueKey("all-1"), uniqueKey("all-2")];
      const holder = await other.lock(undefined, second);
      const controller = new AbortController();
      const waiting = lockAll(l, controller.signal, [second, first]); // taken in sorted order: first, then second
      await sleep(100);
      expect((await other.tryLock(undefined, first))[0]).toBe(false); // held by the waiting lockAll
      controller.abort();
      await expect(waiting).rejects.toBe(controller.signal.reason);
      expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
      const [ok, release] = await other.tryLock(undefined, first);
      expect(ok).toBe(true);
      await Promise.all([release(), holder()]);
    });

    it("an already-aborted signal rejects with its reason and takes nothing", async () => {
      const l = await harness.create();
      const keys = [uniqueKey("all"), uniqueKey("all")];
      const controller = new AbortController();
      controller.abort(new Error("gave up"));
      await expect(lockAll(l, controller.signal, keys)).rejects.toBe(controller.signal.reason);
      await expect(tryLockAll(l, controller.signal, keys)).rejects.toBe(controller.signal.reason);
      const [ok, release] = await tryLockAll(l, undefined, keys);
      expect(ok).toBe(true);
      await release();
    });

    it("tryLockAll: [true, release] when all are free; [false, no-op] releasing what it took otherwise", async () => {
      const l = await harness.create();
      const other = await harness.peer(l);
      const [first, second, third] = [uniqueKey("all-1"), uniqueKey("all-2"), uniqueKey("all-3")];
      const holder = await other.lock(undefined, second);
      const [ok, noop] = await tryLockAll(l, undefined, [third, second, first]);
      expect(ok).toBe(false);
      await noop();
      const [freeFirst, releaseFirst] = await other.tryLock(undefined, first); // released, not leaked
      expect(freeFirst).toBe(true);
      await Promise.all([releaseFirst(), holder()]);
      const [all, release] = await tryLockAll(l, undefined, [third, second, first, second]);
      expect(all).toBe(true);
      for (const key of [first, second, third]) expect((await other.tryLock(undefined, key))[0]).toBe(false);
      await release();
      const [again, releaseAgain] = await tryLockAll(other, undefined, [first, second, third]);
      expect(again).toBe(true);
      await releaseAgain();
    });

    it("closing the locker while lockAll waits rejects it and releases what it took", async () => {
      const l = await harness.create();
      const other = await harness.peer(l);
      const [first, second] = [uniqueKey("all-1"), uniqueKey("all-2")];
      const holder = await other.lock(undefined, second);
      const waiting = lockAll(l, undefined, [first, second]).catch((e: unknown) => e);
      await sleep(100);
      await l.close();
      expect(await waiting).toMatchObject({ code: "ERR_GLOBALLOCK_CLOSED" });
      const checker = await harness.create();
      const [ok, release] = await checker.tryLock(undefined, first);
      expect(ok).toBe(true);
      await Promise.all([release(), holder()]);
    });
  });
}
