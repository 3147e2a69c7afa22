/**
 * PostgresLocker against real faults of a real server: a killed backend, a restart, an exhausted
 * pool, an unreachable server; and no connection left behind after close().
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LockLostError, PostgresLocker, StoreUnavailableError } from "../../src/index.js";
import { freePort } from "../../support/postgres-server.mjs";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { eventually } from "../helpers/wait.js";

describe("PostgresLocker faults", () => {
  let fixture: PostgresFixture;

  beforeAll(async () => {
    fixture = await PostgresFixture.start();
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  /** Backend pids holding an advisory lock (granted), other than `except`. */
  const advisoryHolders = async (): Promise<number[]> =>
    (
      await fixture.server.query<{ pid: number }>(
        "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1",
      )
    ).map((row) => row.pid);

  it("pg_terminate_backend of the holder's connection: lost + onLockLost, and the next holder gets the key", async () => {
    const lost: LockLostError[] = [];
    const holder = fixture.locker({ onLockLost: (error) => lost.push(error) });
    const waiter = fixture.locker();
    const key = uniqueKey("pg-kill");
    const lease = await holder.acquire(undefined, key);
    const [pid] = await advisoryHolders();
    expect(pid).toBeDefined();
    const waiting = waiter.acquire(AbortSignal.timeout(5000), key);
    await fixture.server.query("SELECT pg_terminate_backend($1)", [pid]);
    const reason = (await whenAborted(lease.lost)) as LockLostError;
    expect(reason.reason).toBe("taken");
    expect(lost).toEqual([reason]);
    expect(() => lease.assertHeld()).toThrow(/lost/);
    const next = await waiting;
    next.assertHeld();
    expect(await lease.releaseWithOutcome()).toBe("expired");
    expect(await holder.tryAcquire(undefined, key)).toBeUndefined(); // the holder reconnects; the key is taken
    expect(await next.releaseWithOutcome()).toBe("released");
    expect(await holder.tryAcquire(undefined, key)).toBeDefined();
  });

  it("a server restart loses every held lock; the locker reconnects and fencing tokens keep rising", async () => {
    const holder = fixture.locker();
    const keys = [uniqueKey("pg-restart"), uniqueKey("pg-restart")];
    const leases = await Promise.all(keys.map((key) => holder.acquire(undefined, key, { fencing: true })));
    const before = leases.map((lease) => lease.fencingToken as bigint);
    await fixture.server.restart();
    for (const lease of leases) expect(((await whenAborted(lease.lost)) as LockLostError).reason).toBe("taken");
    await eventually(async () => {
      try {
        const lease = await holder.acquire(AbortSignal.timeout(1000), keys[0] as string, { fencing: true });
        expect(lease.fencingToken).toBeGreaterThan(before[1] as bigint);
        await lease.release();
        return true;
      } catch (error) {
        if (error instanceof StoreUnavailableError) return false;
        throw error;
      }
    });
    for (const lease of leases) await lease.release();
  });

  it("an exhausted pool: a wait that honours the signal, else a StoreUnavailableError after connectTimeout", async () => {
    const pool = fixture.pool(1);
    const hog = await pool.connect();
    try {
      // A connectTimeout far beyond the test timeout: the wait can only end by the signal.
      const patient = fixture.locker({ connectTimeout: 600_000 }, pool);
      const signal = AbortSignal.timeout(100);
      const aborted = await patient.lock(signal, uniqueKey("pg-pool")).catch((e: unknown) => e);
      expect(aborted).toBe(signal.reason);
      const locker = fixture.locker({ connectTimeout: 300 }, pool);
      const error = await locker.lock(undefined, uniqueKey("pg-pool")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toMatch(/pool exhausted/);
      expect((error as Error).cause).toBeInstanceOf(Error);
    } finally {
      hog.release();
    }
  });

  it("an unreachable server is a StoreUnavailableError carrying the connection error", async () => {
    const port = await freePort();
    const pool = fixture.server.pool({ port, connectionTimeoutMillis: 1000 });
    fixture.pools.push(pool);
    const locker = new PostgresLocker(pool);
    fixture.lockers.push(locker);
    const error = await locker.tryLock(undefined, uniqueKey("pg-down")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as { cause?: { code?: string } }).cause?.code).toBe("ECONNREFUSED");
  });

  it("close() gives the connection back (clean) and leaves no session behind (pg_stat_activity)", async () => {
    const pool = fixture.server.pool({ max: 2, application_name: "globallock-leak" });
    const sessions = async (): Promise<number> =>
      Number(
        (
          await fixture.server.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'globallock-leak%'",
          )
        )[0]?.n,
      );
    // Its session shows the owner as application_name while the locker has it.
    const locker = new PostgresLocker(pool, { owner: "globallock-leak-owner" });
    const key = uniqueKey("pg-leak");
    const lease = await locker.acquire(undefined, key, { fencing: true });
    const waiting = locker.lock(undefined, key).catch((e: unknown) => e);
    expect(await sessions()).toBe(1);
    expect(pool.totalCount - pool.idleCount).toBe(1);
    const closed = locker.close();
    expect(await waiting).toMatchObject({ code: "ERR_GLOBALLOCK_CLOSED" });
    await closed;
    expect(pool.totalCount - pool.idleCount).toBe(1); // the held lease keeps it until released
    expect(await lease.releaseWithOutcome()).toBe("released");
    await eventually(() => pool.idleCount === pool.totalCount);
    // The connection went back clean: no listening, no lock.
    const client = await pool.connect();
    const [state] = (
      await client.query(
        "SELECT (SELECT count(*) FROM pg_listening_channels()) AS listening, (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS locks, current_setting('application_name') AS name",
      )
    ).rows;
    client.release();
    expect(state).toEqual({ listening: "0", locks: "0", name: "globallock-leak" });
    await pool.end();
    await eventually(async () => (await sessions()) === 0);
    const other = fixture.locker();
    expect(await other.tryAcquire(undefined, key)).toBeDefined();
  });

  it("a pooled connection whose prepared statements someone deallocated still locks and releases", async () => {
    const pool = fixture.pool(1);
    const key = uniqueKey("pg-deallocated");
    const first = new PostgresLocker(pool);
    await (await first.acquire(undefined, key)).release();
    await first.close();
    // The same connection (max 1): pg still believes the locker's statements are prepared on it.
    const client = await pool.connect();
    await client.query("DEALLOCATE ALL");
    client.release();
    const second = new PostgresLocker(pool);
    const lease = await second.acquire(undefined, key);
    expect(await fixture.locker().tryAcquire(undefined, key)).toBeUndefined();
    expect(await lease.releaseWithOutcome()).toBe("released");
    expect(await fixture.locker().tryAcquire(undefined, key)).toBeDefined();
    await second.close();
  });

  it("a lease held at close() is freed by the server once expiry passes", async () => {
    const pool = fixture.pool(2);
    const locker = new PostgresLocker(pool, { expiry: 400 });
    const key = uniqueKey("pg-close-held");
    const lease = await locker.acquire(undefined, key);
    await locker.close();
    const reason = (await whenAborted(lease.lost)) as LockLostError;
    expect(reason.reason).toBe("expired");
    const other = fixture.locker();
    expect(await other.tryAcquire(undefined, key)).toBeDefined();
    expect(pool.totalCount).toBe(0);
  });
});
