/**
 * The read-write lock contract (DESIGN.md "Additions": read-write locks) as one vitest suite, run
 * against every ReadWriteLocker. Each view is a Locker too: the `write` view also runs the lock
 * contract (test/contracts/contract.ts); this suite covers how readers and writers share a key.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Lease, LockerClosedError, type ReadWriteLocker, UnsupportedError } from "../../src/index.js";
import { wakeOnlyCrowd } from "../helpers/crowd.js";
import { overlappingHolders } from "../helpers/overlap.js";
import { eventually, sleep, untilWaiting } from "../helpers/wait.js";
import { expectInvalid, uniqueKey } from "./contract.js";

export interface ReadWriteHarness {
  /** A new read-write locker (closed by `cleanup`). `wakeOnly`: its safety-net polling is so slow
   *  that only a release notification can wake a waiter in time. */
  create(options?: { wakeOnly?: boolean }): Promise<ReadWriteLocker>;
  /** A second read-write locker on `rw`'s store (for Redis: new connections, like another
   *  process; for memory: the same instance, since its store is the instance). */
  peer(rw: ReadWriteLocker, options?: { wakeOnly?: boolean }): Promise<ReadWriteLocker>;
  /** Whether `write.acquire(..., { fencing: true })` is supported (false: an UnsupportedError). */
  readonly fencing: boolean;
  /** Closes every locker and connection the harness made. */
  cleanup(): Promise<void>;
}

/** Acquires through `acquire` and records `label` in `order` once granted. */
async function recorded(acquire: Promise<Lease>, order: string[], label: string): Promise<Lease> {
  const lease = await acquire;
  order.push(label);
  return lease;
}

/** Registers the read-write contract suite for one implementation. */
export function readWriteContract(name: string, setup: () => Promise<ReadWriteHarness>): void {
  describe(`Read-write contract: ${name}`, () => {
    let harness: ReadWriteHarness;

    beforeAll(async () => {
      harness = await setup();
    });
    afterAll(async () => {
      await harness?.cleanup();
    });

    const timeout = (): AbortSignal => AbortSignal.timeout(10_000);

    it("lets many readers hold a key at once, here and on a peer", async () => {
      const rw = await harness.create();
      const other = await harness.peer(rw);
      const key = uniqueKey("rw");
      const readers = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? rw : other).read.acquire(timeout(), key)),
      );
      const late = await other.read.tryAcquire(undefined, key);
      expect(late).toBeDefined();
      expect((await rw.write.tryLock(undefined, key))[0]).toBe(false);
      expect(await other.write.tryAcquire(undefined, key)).toBeUndefined();
      await Promise.all([...readers, late as Lease].map((lease) => lease.release()));
      const writer = await rw.write.tryAcquire(undefined, key);
      expect(writer).toBeDefined();
      await writer?.release();
    });

    it("a writer excludes readers and writers, here and on a peer", async () => {
      const rw = await harness.create();
      const other = await harness.peer(rw);
      const key = uniqueKey("rw");
      const writer = await rw.write.acquire(undefined, key);
      for (const locker of [rw, other]) {
        expect(await locker.read.tryAcquire(undefined, key)).toBeUndefined();
        expect((await locker.read.tryLock(undefined, key))[0]).toBe(false);
        expect(await locker.write.tryAcquire(undefined, key)).toBeUndefined();
      }
      const signal = AbortSignal.timeout(100);
      const timedOut = await other.read.acquire(signal, key).catch((e: unknown) => e);
      expect(timedOut).toBe(signal.reason);
      const reader = other.read.acquire(timeout(), key);
      await sleep(30);
      await writer.release();
      const readLease = await reader;
      expect(await rw.write.tryAcquire(undefined, key)).toBeUndefined();
      await readLease.release();
    });

    it("a waiting writer blocks readers that arrive after it", async () => {
      const rw = await harness.create();
      const other = await harness.peer(rw);
      const key = uniqueKey("rw");
      const order: string[] = [];
      const firstReader = await rw.read.acquire(undefined, key);
      const writer = recorded(other.write.acquire(timeout(), key), order, "writer");
      // Readers could share the key with the first one, but once the writer is queued before them
      // (its first try has reached the store: no fixed sleep, which a loaded machine outlasts)
      // they are refused. A reader let in before that is released at once.
      await eventually(async () => {
        const early = await rw.read.tryAcquire(undefined, key);
        await early?.release();
        return early === undefined;
      });
      expect(await other.read.tryAcquire(undefined, key)).toBeUndefined();
      const lateReader = recorded(rw.read.acquire(timeout(), key), order, "late reader");
      await sleep(100);
      expect(order).toEqual([]);
      await firstReader.release();
      const writeLease = await writer;
      await sleep(50);
      expect(order).toEqual(["writer"]);
      await writeLease.release();
      await (await lateReader).release();
      expect(order).toEqual(["writer", "late reader"]);
    });

    it("a writer's release lets every reader queued before the next writer in, together", async () => {
      const rw = await harness.create();
      const other = await harness.peer(rw);
      const key = uniqueKey("rw");
      const order: string[] = [];
      let readersIn = 0;
      let readersTogether = false;
      const firstWriter = await rw.write.acquire(undefined, key);
      const reader = async (label: string, side: ReadWriteLocker): Promise<void> => {
        const lease = await recorded(side.read.acquire(timeout(), key), order, label);
        readersIn += 1;
        // Hold until all three readers hold at once (they were admitted together).
        await eventually(() => readersIn >= 3 || order.includes("next writer"), 5000);
        if (readersIn >= 3) readersTogether = true;
        await sleep(20);
        await lease.release();
      };
      // Arrival order: each caller is observably waiting (its first try has reached the store and
      // queued it) before the next one comes; no fixed sleep, which a loaded machine outlasts.
      const waiting = new Map<ReadWriteLocker, number>();
      const queued = async (side: ReadWriteLocker): Promise<void> => {
        const count = (waiting.get(side) ?? 0) + 1;
        waiting.set(side, count);
        await untilWaiting(side.read, count);
      };
      const readers: Array<Promise<void>> = [];
      for (const [label, side] of [
        ["reader 1", rw],
        ["reader 2", other],
        ["reader 3", rw],
      ] as const) {
        readers.push(reader(label, side));
        await queued(side);
      }
      const nextWriter = recorded(other.write.acquire(timeout(), key), order, "next writer");
      await queued(other);
      const lastReader = recorded(rw.read.acquire(timeout(), key), order, "last reader");
      await sleep(100);
      expect(order).toEqual([]);
      await firstWriter.release();
      await Promise.all(readers);
      expect(readersTogether).toBe(true);
      const writeLease = await nextWriter;
      await writeLease.release();
      await (await lastReader).release();
      expect(order.slice(0, 3).sort()).toEqual(["reader 1", "reader 2", "reader 3"]);
      expect(order.slice(3)).toEqual(["next writer", "last reader"]);
    });

    it("a writer is not starved by a continuous stream of overlapping readers", async () => {
      const rw = await harness.create();
      const other = await harness.peer(rw);
      const key = uniqueKey("rw");
      const stream = overlappingHolders((signal, i) => (i % 2 === 0 ? rw : other).read.acquire(signal, key));
      await sleep(150); // the readers overlap: the key is never free of them
      const started = performance.now();
      const writer = await other.write.acquire(timeout(), key);
      const waited = performance.now() - started;
      expect(await rw.read.tryAcquire(undefined, key)).toBeUndefined();
      await Promise.all([stream.stop(), writer.release()]);
      expect(waited).toBeLessThan(5000);
    });

    it("six lockers, each with a writer and two readers looping on one key, all get through, woken by releases: a writer alone, readers only with readers", async () => {
      const lockers = await wakeOnlyCrowd(await harness.create({ wakeOnly: true }), 6, (of, options) =>
        harness.peer(of, options),
      );
      const key = uniqueKey("rw-crowd");
      let writers = 0;
      let readers = 0;
      let breaches = 0;
      let sections = 0;
      const check = (): void => {
        if (writers > 1 || (writers === 1 && readers > 0)) breaches += 1;
      };
      await Promise.all(
        lockers.flatMap((rw) =>
          (["write", "read", "read"] as const).map(async (view) => {
            for (let section = 0; section < 3; section++) {
              const lease = await rw[view].acquire(AbortSignal.timeout(20_000), key);
              if (view === "write") writers += 1;
              else readers += 1;
              check();
              await sleep(1);
              if (view === "write") writers -= 1;
              else readers -= 1;
              sections += 1;
              await lease.release();
            }
          }),
        ),
      );
      expect(breaches).toBe(0);
      expect(sections).toBe(54);
    });

    it("wakes a queued writer on the last reader's release, not on a polling interval", async () => {
      const rw = await harness.create({ wakeOnly: true });
      const other = await harness.peer(rw, { wakeOnly: true });
      const key = uniqueKey("rw");
      const reader = await rw.read.acquire(undefined, key);
      const writer = other.write.acquire(AbortSignal.timeout(5000), key);
      await sleep(100);
      await reader.release();
      const writeLease = await writer; // with polling only, this would take longer than 5 s
      const readerAgain = rw.read.acquire(AbortSignal.timeout(5000), key);
      await sleep(100);
      await writeLease.release();
      await (await readerAgain).release();
    });

    it("fencing: write tokens rise with every write grant (or refuse); read fencing is an UnsupportedError", async () => {
      const rw = await harness.create();
      const key = uniqueKey("rw");
      await expect(rw.read.acquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
      await expect(rw.read.tryAcquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
      if (!harness.fencing) {
        await expect(rw.write.acquire(undefined, key, { fencing: true })).rejects.toBeInstanceOf(UnsupportedError);
      } else {
        const tokens: bigint[] = [];
        const other = await harness.peer(rw);
        for (const side of [rw, other, rw]) {
          const reader = await side.read.acquire(undefined, key); // reads between writes do not matter
          await reader.release();
          const lease = await side.write.acquire(undefined, key, { fencing: true });
          expect(typeof lease.fencingToken).toBe("bigint");
          tokens.push(lease.fencingToken as bigint);
          await lease.release();
        }
        for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as bigint);
      }
      const writer = await rw.write.tryAcquire(undefined, key); // nothing was left half-acquired
      expect(writer).toBeDefined();
      await writer?.release();
    });

    it("weight on either view must be 1", async () => {
      const rw = await harness.create();
      const key = uniqueKey("rw");
      for (const view of [rw.read, rw.write]) {
        await expectInvalid(view.acquire(undefined, key, { weight: 2 }), "options.weight", 2);
        await expectInvalid(view.tryAcquire(undefined, key, { weight: 0 }), "options.weight", 0);
        const lease = await view.tryAcquire(undefined, key, { weight: 1 });
        expect(lease).toBeDefined();
        await lease?.release();
      }
    });

    for (const closed of ["read", "write", "both"] as const) {
      it(`closing ${closed === "both" ? "the read-write locker" : `the ${closed} view`} closes both views`, async () => {
        const rw = await harness.create();
        const key = uniqueKey("rw");
        const writer = await rw.write.acquire(undefined, key);
        const waitingReader = rw.read.acquire(undefined, key).catch((e: unknown) => e);
        const waitingWriter = rw.write.acquire(undefined, key).catch((e: unknown) => e);
        await sleep(30);
        await (closed === "both" ? rw : rw[closed]).close();
        expect(await waitingReader).toBeInstanceOf(LockerClosedError);
        expect(await waitingWriter).toBeInstanceOf(LockerClosedError);
        for (const view of [rw.read, rw.write]) {
          await expect(view.lock(undefined, key)).rejects.toBeInstanceOf(LockerClosedError);
          await expect(view.tryLock(undefined, uniqueKey())).rejects.toBeInstanceOf(LockerClosedError);
          await expect(view.tryAcquire(undefined, uniqueKey())).rejects.toBeInstanceOf(LockerClosedError);
        }
        await rw.read.close(); // idempotent, whichever view
        await rw.close();
        expect(await writer.releaseWithOutcome()).toBe("released"); // releases still work
        const fresh = await harness.create();
        const lease = await fresh.write.tryAcquire(undefined, key);
        expect(lease).toBeDefined();
        await lease?.release();
      });
    }
  });
}
