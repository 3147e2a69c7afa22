/**
 * What a lease table must survive, on each dialect: holders in other processes (exclusion, and
 * fencing tokens rising in grant order), a holder killed with SIGKILL (taken over once its row has
 * expired on the database's clock, not before), and a lease row deleted by hand (its holder's lease
 * is lost at the next extension).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LockLostError } from "../../src/index.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { TABLE_EXPIRY, type TableFixture } from "../helpers/table-harness.js";
import { removeChildBundle, TableChild } from "../helpers/table-processes.js";

/** The lease table and name prefix of the fixture's lockers (the defaults). */
const TABLE = "globallock_leases";
const PREFIX = "globallock:";

/** Registers the fault tests on the fixture `setup` gives. */
export function tableFaults(name: string, setup: () => Promise<TableFixture>): void {
  describe(`Table faults: ${name}`, () => {
    const children: TableChild[] = [];
    afterAll(async () => {
      await Promise.all(children.map((child) => child.kill()));
      started = undefined;
      removeChildBundle();
    });

    /** Three children with a locker each, started once for the tests that need other processes. */
    let started: Promise<TableChild[]> | undefined;
    const three = (fixture: TableFixture): Promise<TableChild[]> => {
      started ??= Promise.all(
        [0, 1, 2].map(async () => {
          const made = await TableChild.start(fixture.target, { expiry: TABLE_EXPIRY, backoff: { min: 10, max: 100 } });
          children.push(made);
          return made;
        }),
      );
      return started;
    };

    /** The expiry (database clock, ms) of the key's newest row. */
    const newestExpiry = async (fixture: TableFixture, key: string): Promise<number> => {
      const [row] = await fixture.query(`SELECT expires_at FROM ${TABLE} WHERE name = ? ORDER BY id DESC LIMIT 1`, [
        PREFIX + key,
      ]);
      return Number(row?.expires_at);
    };

    it("holders in three processes never overlap, and their fencing tokens rise in grant order", async () => {
      const fixture = await setup();
      const directory = mkdtempSync(join(tmpdir(), "globallock-table-faults-"));
      try {
        const [log, counter] = [join(directory, "tokens"), join(directory, "counter")];
        writeFileSync(counter, "0");
        const key = uniqueKey("processes");
        const holders = await three(fixture);
        await Promise.all(holders.map((holder) => holder.ask({ op: "loop", key, rounds: 3, log, counter })));
        // A lost update would show as a lower count: two holders read the same number.
        expect(readFileSync(counter, "utf8")).toBe("9");
        const tokens = readFileSync(log, "utf8").trim().split("\n").map(BigInt);
        expect(tokens).toHaveLength(9);
        for (let index = 1; index < tokens.length; index++) {
          expect(tokens[index]).toBeGreaterThan(tokens[index - 1] as bigint);
        }
      } finally {
        rmSync(directory, { recursive: true, force: true });
      }
    });

    it("a holder killed with SIGKILL is taken over once its row expired on the database's clock, not before", async () => {
      const fixture = await setup();
      const key = uniqueKey("sigkill");
      const [holder] = (await three(fixture)).slice(-1) as [TableChild];
      const { fencingToken } = await holder.ask({ op: "hold", key, options: { expiry: 1000 } });
      await holder.kill();
      const here = fixture.locker({ backoff: { min: 10, max: 200 } });
      expect(await here.tryAcquire(undefined, key)).toBeUndefined();
      const deadUntil = await newestExpiry(fixture, key);
      const lease = await here.acquire(AbortSignal.timeout(10_000), key, {
        fencing: true,
        autoExtend: false,
        expiry: 3000,
      });
      // The new row was made (or renewed) with 3000 ms on the database's clock: when it was granted.
      const grantedAt = (await newestExpiry(fixture, key)) - 3000;
      expect(grantedAt).toBeGreaterThanOrEqual(deadUntil);
      expect(lease.fencingToken).toBeGreaterThan(BigInt(fencingToken as string));
      expect(await lease.releaseWithOutcome()).toBe("released");
    });

    it("a lease row deleted by hand: the holder's lease is lost (taken) at its next extension", async () => {
      const fixture = await setup();
      const key = uniqueKey("deleted");
      const locker = fixture.locker({ expiry: 1000 });
      const lease = await locker.acquire(undefined, key);
      await fixture.query(`DELETE FROM ${TABLE} WHERE name = ?`, [PREFIX + key]);
      const reason = await whenAborted(lease.lost);
      expect(reason).toBeInstanceOf(LockLostError);
      // "taken", not "expired": an extension found the row gone, before the lease ran out here.
      expect((reason as LockLostError).reason).toBe("taken");
      const [free, release] = await locker.tryLock(undefined, key);
      expect(free).toBe(true);
      await release();
    });
  });
}
