/**
 * PostgresLocker behind a real PgBouncer. Transaction and statement pooling share server sessions
 * between clients, so session locks cannot be trusted there: the locker refuses at its first
 * attempt, never lets two holders overlap, and never frees a lock it does not hold. Session
 * pooling keeps a session per client: there the whole contract holds.
 */
import type { Pool } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LockLostError, PostgresLocker, PostgresReadWriteLocker, UnsupportedError } from "../../src/index.js";
import { PgBouncerServer } from "../../support/pgbouncer-server.mjs";
import { PostgresServer } from "../../support/postgres-server.mjs";
import { lockerContract, uniqueKey, whenAborted } from "../contracts/contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";

/** Advisory locks granted on the server, as `pid:objid` (the low 32 bits of a lock id). */
async function advisoryLocks(server: PostgresServer): Promise<string[]> {
  const rows = await server.query<{ lock: string }>(
    "SELECT pid || ':' || objid AS lock FROM pg_locks WHERE locktype = 'advisory' AND granted ORDER BY 1",
  );
  return rows.map((row) => row.lock);
}

/** A refusal: the pooler named, and the ways out. */
function expectRefusal(error: unknown): void {
  expect(error).toBeInstanceOf(UnsupportedError);
  expect((error as UnsupportedError).code).toBe("ERR_GLOBALLOCK_UNSUPPORTED");
  expect((error as Error).message).toMatch(/transaction or statement mode/);
  expect((error as Error).message).toMatch(/pool_mode=session/);
  expect((error as Error).message).toMatch(/directly/);
}

for (const poolMode of ["transaction", "statement"] as const) {
  describe(`PostgresLocker behind PgBouncer (pool_mode=${poolMode})`, () => {
    let server: PostgresServer;
    let pooler: PgBouncerServer;
    const pools: Pool[] = [];
    const lockers: { close(): Promise<void> }[] = [];

    beforeAll(async () => {
      server = await PostgresServer.start();
      pooler = await PgBouncerServer.start(server, { poolMode, poolSize: 3 });
    });
    afterAll(async () => {
      await Promise.allSettled(lockers.map((locker) => locker.close()));
      await pooler?.stop();
      await server?.stop();
      await Promise.allSettled(pools.map((pool) => pool.end()));
    });

    const pool = (max = 4): Pool => {
      const made = pooler.pool({ max });
      pools.push(made);
      return made;
    };
    const locker = (target: Pool = pool()): PostgresLocker => {
      const made = new PostgresLocker(target);
      lockers.push(made);
      return made;
    };

    it("the first attempt refuses with UnsupportedError naming the pooler, and keeps refusing; nothing is held", async () => {
      const refused = locker();
      const key = uniqueKey("pgb-refuse");
      const first = await refused.tryAcquire(undefined, key).catch((error: unknown) => error);
      expectRefusal(first);
      expectRefusal(await refused.lock(undefined, key).catch((error: unknown) => error));
      expect(await advisoryLocks(server)).toEqual([]);
      const rw = new PostgresReadWriteLocker(pool());
      lockers.push(rw);
      expectRefusal(await rw.read.tryAcquire(undefined, key).catch((error: unknown) => error));
    });

    it("lockers racing for one key while a server connection is kept busy: refusals, never two holders", async () => {
      const busy = pooler.pool({ max: 1 });
      pools.push(busy);
      const sleeping = busy.query("SELECT pg_sleep(1)");
      const key = uniqueKey("pgb-race");
      // Racing, a locker whose every statement happened to land on its own server connection may
      // not have found the pooler yet: it may hold, alone, or miss; the others refuse.
      const attempts = await Promise.allSettled(Array.from({ length: 4 }, () => locker().tryAcquire(undefined, key)));
      await sleeping;
      const leases = attempts.flatMap((attempt) =>
        attempt.status === "fulfilled" && attempt.value ? [attempt.value] : [],
      );
      const refusals = attempts.flatMap((attempt) => (attempt.status === "rejected" ? [attempt.reason] : []));
      expect(leases.length).toBeLessThanOrEqual(1);
      expect(refusals.length).toBeGreaterThanOrEqual(1);
      for (const refusal of refusals) expectRefusal(refusal);
      expect((await advisoryLocks(server)).length).toBe(leases.length);
      for (const lease of leases) await lease.release();
    });

    it("a refused locker's clean-up leaves another client's session lock on the shared server connection", async () => {
      // Another client takes a session lock through the pooler: it stays on the server connection.
      const other = pooler.pool({ max: 1 });
      pools.push(other);
      await other.query("SELECT pg_advisory_lock(424242)");
      const before = await advisoryLocks(server);
      expect(before).toHaveLength(1);
      const refused = locker();
      expectRefusal(await refused.tryAcquire(undefined, uniqueKey("pgb-cleanup")).catch((error: unknown) => error));
      await refused.close();
      expect(await advisoryLocks(server)).toEqual(before);
    });
  });
}

/**
 * A PostgreSQL server behind a transaction pooler with `poolSize` server connections, for one
 * describe block (started before its tests, stopped after); `pool` makes a pool through it.
 */
function transactionPooler(poolSize: number) {
  const pools: Pool[] = [];
  const setup = { server: undefined as unknown as PostgresServer, pooler: undefined as unknown as PgBouncerServer };
  beforeAll(async () => {
    setup.server = await PostgresServer.start();
    setup.pooler = await PgBouncerServer.start(setup.server, { poolMode: "transaction", poolSize });
  });
  afterAll(async () => {
    await setup.pooler?.stop();
    await setup.server?.stop();
    await Promise.allSettled(pools.map((pool) => pool.end()));
  });
  return {
    setup,
    pool(max: number): Pool {
      const made = setup.pooler.pool({ max });
      pools.push(made);
      return made;
    },
  };
}

describe("PostgresLocker behind PgBouncer (pool_mode=transaction): a session that moves later", () => {
  const { setup, pool: poolOf } = transactionPooler(2);

  it("a held lease whose statements land on another server connection is lost (expired), and the locker refuses", async () => {
    // A pool of one: no second connection to probe with, so the first attempt cannot tell.
    const [pool, busy] = [poolOf(1), poolOf(1)];
    const server = setup.server;
    const locker = new PostgresLocker(pool, { expiry: 1000 });
    const lost: LockLostError[] = [];
    const key = uniqueKey("pgb-moved");
    const lease = await locker.acquire(undefined, key);
    lease.lost.addEventListener("abort", () => lost.push(lease.lost.reason as LockLostError));
    const [held] = await advisoryLocks(server);
    // Another client keeps the holder's server connection busy: the next extension goes elsewhere.
    const sleeping = busy.query("SELECT pg_sleep(3)");
    const reason = (await whenAborted(lease.lost)) as LockLostError;
    expect(reason.reason).toBe("expired");
    expect(reason.cause).toBeInstanceOf(UnsupportedError);
    expect(lost).toEqual([reason]);
    expect(await lease.releaseWithOutcome()).toBe("expired");
    expectRefusal(await locker.tryAcquire(undefined, uniqueKey("pgb-moved")).catch((error: unknown) => error));
    await sleeping;
    // Nothing was taken or freed on the other server connection: the lock stays where it was taken.
    expect(await advisoryLocks(server)).toEqual([held]);
    await locker.close();
  });
});

describe("PostgresLocker behind PgBouncer (pool_mode=transaction, one server connection)", () => {
  const { setup, pool: poolOf } = transactionPooler(1);

  it("a locker that finds its prepared statement already on the server connection refuses, naming the pooler", async () => {
    // Pools of one connection: no probe, so the first locker's statements all run on the one
    // server connection, and prepare the lock statement there.
    const [first, second] = [poolOf(1), poolOf(1)];
    const server = setup.server;
    const key = uniqueKey("pgb-prepared");
    const earlier = new PostgresLocker(first);
    await (await earlier.acquire(undefined, key)).release();
    await earlier.close();
    const later = new PostgresLocker(second);
    const refusal = await later.tryAcquire(undefined, key).catch((error: unknown) => error);
    expectRefusal(refusal);
    expect((refusal as Error).message).toMatch(/prepared statement already existed/);
    expect(await advisoryLocks(server)).toEqual([]);
    await later.close();
  });
});

lockerContract("PostgresLocker behind PgBouncer (pool_mode=session)", async () => {
  const server = await PostgresServer.start({ args: ["-c", "max_connections=150"] });
  const pooler = await PgBouncerServer.start(server, { poolMode: "session", poolSize: 120 });
  return new PostgresFixture(server, pooler).harness();
});
