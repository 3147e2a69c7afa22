/**
 * What the table lockers add to the contract suites, on each dialect, briefly: a semaphore and a
 * read-write locker across two lockers, `list` and `inspect` read from the table, a key's lock row
 * gone once its last lease is released, a table of the caller's naming, and `createTable: false`.
 */
import { describe, expect, it } from "vitest";
import { StoreUnavailableError } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import type { TableFixture } from "../helpers/table-harness.js";

/** How long a state is waited for before the test fails (a bound on a hang, not a speed limit). */
const POLL = { timeout: 10_000, interval: 20 };

/** Registers the smoke tests on the fixture `setup` gives. */
export function tableSmoke(name: string, setup: () => Promise<TableFixture>): void {
  describe(`Table smoke: ${name}`, () => {
    it("a semaphore of 3 across two lockers: weights add up, inspect shows the shared holders and the waiter", async () => {
      const fixture = await setup();
      const [a, b] = [fixture.semaphore(3), fixture.semaphore(3)];
      const key = uniqueKey("smoke-sem");
      const first = await a.acquire(undefined, key, { weight: 2 });
      const second = await b.acquire(undefined, key);
      expect(await b.tryAcquire(undefined, key)).toBeUndefined();
      const waiting = a.acquire(AbortSignal.timeout(10_000), key, { weight: 2 });
      await expect.poll(async () => (await b.inspect(undefined, key)).waiting, POLL).toBe(1);
      const info = await b.inspect(undefined, key);
      expect(info.holders.map((holder) => [holder.mode, holder.weight])).toEqual([
        ["shared", 2],
        ["shared", 1],
      ]);
      await first.release();
      const third = await waiting;
      await Promise.all([second.release(), third.release()]);
      expect(await b.tryAcquire(undefined, key, { weight: 3 })).toBeDefined();
    });

    it("read-write across two lockers: readers share, a writer waits for them and then excludes them", async () => {
      const fixture = await setup();
      const [a, b] = [fixture.readWrite(), fixture.readWrite()];
      const key = uniqueKey("smoke-rw");
      const readers = await Promise.all([a.read.acquire(undefined, key), b.read.acquire(undefined, key)]);
      const writing = b.write.acquire(AbortSignal.timeout(10_000), key, { fencing: true });
      await expect.poll(async () => (await a.read.inspect(undefined, key)).waiting, POLL).toBe(1);
      expect(await a.read.tryAcquire(undefined, key)).toBeUndefined();
      await Promise.all(readers.map((reader) => reader.release()));
      const writer = await writing;
      expect(typeof writer.fencingToken).toBe("bigint");
      expect((await a.read.inspect(undefined, key)).holders).toEqual([
        expect.objectContaining({ mode: "exclusive", weight: 1 }),
      ]);
      await writer.release();
    });

    it("list names the held keys under a prefix, with their holders, from the table", async () => {
      const fixture = await setup();
      const locker = fixture.locker();
      const base = uniqueKey("smoke-list");
      const leases = await Promise.all(
        ["a", "b", "c%_!"].map((suffix) => locker.acquire(undefined, `${base}:${suffix}`)),
      );
      const released = await locker.acquire(undefined, `${base}:gone`);
      await released.release();
      const listed = await locker.list(undefined, { prefix: `${base}:` });
      expect(listed.map((info) => info.key)).toEqual([`${base}:a`, `${base}:b`, `${base}:c%_!`]);
      expect(listed.every((info) => info.holders.length === 1)).toBe(true);
      expect(await locker.list(undefined, { prefix: `${base}:c%` })).toHaveLength(1);
      await Promise.all(leases.map((lease) => lease.release()));
      expect(await locker.list(undefined, { prefix: base })).toEqual([]);
    });

    it("a key's rows are gone once its last lease is released (and its lock row, where there is one)", async () => {
      const fixture = await setup();
      const locker = fixture.locker();
      const key = uniqueKey("smoke-rows");
      const lease = await locker.acquire(undefined, key);
      const name = `globallock:${key}`;
      expect(await fixture.query("SELECT token FROM globallock_leases WHERE name = ?", [name])).toHaveLength(1);
      await lease.release();
      expect(await fixture.query("SELECT token FROM globallock_leases WHERE name = ?", [name])).toEqual([]);
      if (fixture.dialect !== "sqlite") {
        expect(await fixture.query("SELECT name FROM globallock_leases_keys WHERE name = ?", [name])).toEqual([]);
      }
    });

    it("a table of the caller's naming is created at the first use; createTable: false leaves a missing one missing", async () => {
      const fixture = await setup();
      const table = `smoke_${process.pid}_${Date.now()}`;
      const refused = fixture.locker({ table, createTable: false });
      const error = await refused.tryAcquire(undefined, uniqueKey()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      const locker = fixture.locker({ table });
      const lease = await locker.acquire(undefined, uniqueKey("smoke-table"));
      expect(await fixture.query(`SELECT token FROM ${table}`)).toHaveLength(1);
      // The table now exists: a locker that does not create it works on it.
      const [taken] = await refused.tryLock(undefined, lease.key);
      expect(taken).toBe(false);
      await lease.release();
    });
  });
}
