/**
 * MySqlLocker against real faults of a real MariaDB: a killed lock connection, a restart, an
 * exhausted pool, an unreachable server; no connection left behind after close(); and what the
 * backend's inspect reads.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LockLostError, MySqlLocker, StoreUnavailableError, UnsupportedError } from "../../src/index.js";
import { lockName } from "../../src/mysql/keys.js";
import { roomName } from "../../src/mysql/probe-watcher.js";
import { freePort } from "../../support/mariadb-server.mjs";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";
import { eventually, untilWaiting } from "../helpers/wait.js";

describe("MySqlLocker faults", () => {
  let fixture: MySqlFixture;

  beforeAll(async () => {
    fixture = await MySqlFixture.start();
    // A user of its own, so that its connections can be counted in the processlist.
    await fixture.server.query("CREATE USER 'leak'@'127.0.0.1'");
    await fixture.server.query("GRANT ALL ON globallock.* TO 'leak'@'127.0.0.1'");
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  /** The connection holding `key`'s lock (default prefix), or null. */
  const holderOf = async (key: string): Promise<number | null> =>
    (
      await fixture.server.query<{ id: number | null }>("SELECT IS_USED_LOCK(?) AS id", [lockName(`globallock:${key}`)])
    )[0]?.id ?? null;

  it("KILL of the holder's lock connection: lost + onLockLost, and the next holder gets the key", async () => {
    const lost: LockLostError[] = [];
    const holder = fixture.locker({ onLockLost: (error) => lost.push(error) });
    const waiter = fixture.locker();
    const key = uniqueKey("my-kill");
    const lease = await holder.acquire(undefined, key);
    const id = await holderOf(key);
    expect(id).not.toBeNull();
    const waiting = waiter.acquire(AbortSignal.timeout(5000), key);
    await untilWaiting(waiter, 1);
    await fixture.server.query(`KILL ${id}`);
    const reason = (await whenAborted(lease.lost)) as LockLostError;
    expect(reason.reason).toBe("taken");
    expect(lost).toEqual([reason]);
    const next = await waiting;
    next.assertHeld();
    expect(await lease.releaseWithOutcome()).toBe("expired");
    expect(await holder.tryAcquire(undefined, key)).toBeUndefined(); // reconnected; the key is taken
    expect(await next.releaseWithOutcome()).toBe("released");
    expect(await holder.tryAcquire(undefined, key)).toBeDefined();
  });

  it("eight lockers on one key all get through, in turn: only the head of the key's waiting room waits for the key itself", async () => {
    const key = uniqueKey("my-crowd");
    const name = lockName(`globallock:${key}`);
    const lockers = Array.from({ length: 8 }, () => fixture.locker());
    /** Sessions blocked in GET_LOCK on the key itself (not on its waiting room), as the server shows them. */
    const onTheKey = async (): Promise<number> =>
      (
        await fixture.server.query<{ info: string | null }>(
          "SELECT INFO AS info FROM information_schema.PROCESSLIST WHERE STATE = 'User lock'",
        )
      ).filter((row) => row.info?.includes(`'${name}'`) === true).length;
    let inside = 0;
    let overlaps = 0;
    const done: number[] = lockers.map(() => 0);
    const most: number[] = [];
    let running = true;
    const sampler = (async () => {
      while (running) {
        most.push(await onTheKey());
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    await Promise.all(
      lockers.map(async (locker, index) => {
        for (let section = 0; section < 5; section++) {
          const release = await locker.lock(undefined, key);
          inside += 1;
          if (inside > 1) overlaps += 1;
          await new Promise((resolve) => setTimeout(resolve, 2));
          inside -= 1;
          done[index] = (done[index] ?? 0) + 1;
          await release();
        }
      }),
    );
    running = false;
    await sampler;
    expect(done).toEqual(lockers.map(() => 5));
    expect(overlaps).toBe(0);
    // Probes that all waited for the key passed it among themselves: seven of them at once here.
    expect(most.length).toBeGreaterThan(0);
    expect(Math.max(...most)).toBeLessThanOrEqual(1);
  });

  it("three lockers with three callers each on one key all get through, in turn, and leave no probe or room behind", async () => {
    const key = uniqueKey("my-crowd-shared");
    const name = lockName(`globallock:${key}`);
    const lockers = Array.from({ length: 3 }, () => fixture.locker());
    let inside = 0;
    let overlaps = 0;
    let sections = 0;
    await Promise.all(
      lockers.flatMap((locker) =>
        Array.from({ length: 3 }, async () => {
          for (let section = 0; section < 4; section++) {
            const release = await locker.lock(undefined, key);
            inside += 1;
            if (inside > 1) overlaps += 1;
            await new Promise((resolve) => setTimeout(resolve, 2));
            inside -= 1;
            sections += 1;
            await release();
          }
        }),
      ),
    );
    expect(sections).toBe(36);
    expect(overlaps).toBe(0);
    // Every probe left the room and gave its connection back: nobody holds or waits for either lock.
    await eventually(
      async () =>
        (
          await fixture.server.query<{ n: number }>(
            "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND LOCATE(?, INFO) > 0",
            [name],
          )
        )[0]?.n === 0,
    );
    const [row] = await fixture.server.query<{ key: unknown; room: unknown }>(
      "SELECT IS_USED_LOCK(?) AS `key`, IS_USED_LOCK(?) AS room",
      [name, roomName(name)],
    );
    expect(row).toEqual({ key: null, room: null });
  });

  it("a session that holds a key's waiting room and never moves blocks nobody: waiters still get the key by their poll", async () => {
    const key = uniqueKey("my-stuck-room");
    const name = lockName(`globallock:${key}`);
    const pool = fixture.pool(1);
    const stuck = await pool.getConnection();
    try {
      // A waiter that stopped while it held the room (a paused process): its session keeps it.
      const [rows] = await stuck.query("SELECT GET_LOCK(?, 0) AS ok", [roomName(name)]);
      expect((rows as Array<{ ok: number }>)[0]?.ok).toBe(1);
      const holder = fixture.locker();
      const waiter = fixture.locker({ backoff: { min: 50, max: 200 } });
      const lease = await holder.acquire(undefined, key);
      const waiting = waiter.acquire(AbortSignal.timeout(10_000), key);
      await untilWaiting(waiter, 1);
      await lease.release();
      // Nobody's probe waits on the key itself (the room never came free), yet the poll takes it.
      const next = await waiting;
      next.assertHeld();
      await next.release();
    } finally {
      await stuck.query("DO RELEASE_ALL_LOCKS()");
      stuck.release();
      await pool.end();
    }
  });

  it("a server down: typed errors; after its restart the locker reconnects and fencing tokens keep rising", async () => {
    const holder = fixture.locker({ connectTimeout: 1000 });
    const key = uniqueKey("my-restart");
    const lease = await holder.acquire(undefined, key, { fencing: true });
    const before = lease.fencingToken as bigint;
    await fixture.server.kill();
    expect(((await whenAborted(lease.lost)) as LockLostError).reason).toBe("taken");
    const down = await holder.tryLock(undefined, uniqueKey("my-down")).catch((e: unknown) => e);
    expect(down).toBeInstanceOf(StoreUnavailableError);
    expect((down as Error).cause).toBeInstanceOf(Error);
    await fixture.server.restart();
    const again = await holder.acquire(AbortSignal.timeout(5000), key, { fencing: true });
    expect(again.fencingToken).toBeGreaterThan(before);
    expect(await again.releaseWithOutcome()).toBe("released");
    expect(await lease.releaseWithOutcome()).toBe("expired");
  });

  it("an exhausted pool: a wait that honours the signal, else a StoreUnavailableError after connectTimeout", async () => {
    const pool = fixture.pool(1);
    const hog = await pool.getConnection();
    try {
      // A connectTimeout far beyond the test timeout: the wait can only end by the signal.
      const patient = fixture.locker({ connectTimeout: 600_000 }, pool);
      const signal = AbortSignal.timeout(100);
      expect(await patient.lock(signal, uniqueKey("my-pool")).catch((e: unknown) => e)).toBe(signal.reason);
      const locker = fixture.locker({ connectTimeout: 300 }, pool);
      const error = await locker.lock(undefined, uniqueKey("my-pool")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toMatch(/pool exhausted/);
      expect((error as Error).cause).toBeInstanceOf(Error);
    } finally {
      hog.release();
    }
  });

  it("an unreachable server is a StoreUnavailableError carrying the connection error", async () => {
    const pool = fixture.server.pool({ port: await freePort(), connectTimeout: 1000 });
    fixture.pools.push(pool);
    const locker = fixture.locker({}, pool);
    const error = await locker.tryLock(undefined, uniqueKey("my-unreachable")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as { cause?: { code?: string } }).cause?.code).toBe("ECONNREFUSED");
  });

  it("close() cancels probes and gives every connection back without a lock; none is left behind", async () => {
    const pool = fixture.server.pool({ user: "leak", connectionLimit: 4 });
    const connections = async (state?: string): Promise<number> =>
      Number(
        (
          await fixture.server.query<{ n: number }>(
            `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE USER = 'leak'${state === undefined ? "" : " AND STATE = ?"}`,
            state === undefined ? [] : [state],
          )
        )[0]?.n,
      );
    const holder = fixture.locker();
    const key = uniqueKey("my-leak");
    const held = await holder.acquire(undefined, key);
    const locker = new MySqlLocker(pool);
    const mine = await locker.acquire(undefined, uniqueKey("my-leak"), { fencing: true });
    const waiting = locker.lock(undefined, key).catch((e: unknown) => e);
    await untilWaiting(locker, 1);
    await eventually(async () => (await connections("User lock")) === 1); // the probe blocks in GET_LOCK
    const closed = locker.close();
    expect(await waiting).toMatchObject({ code: "ERR_GLOBALLOCK_CLOSED" });
    await closed;
    // A probe connection that close() destroyed instead of giving back (its KILL QUERY failed, or
    // its statement did) still shows its GET_LOCK until the server notices the closed socket: once
    // in a CI run, right after close() resolved.
    await eventually(async () => (await connections("User lock")) === 0, 3000);
    expect(await mine.releaseWithOutcome()).toBe("released");
    // Back in the pool, and clean: no user lock on any connection of it.
    const [a, b] = [await pool.getConnection(), await pool.getConnection()];
    const released = await Promise.all(
      [a, b].map(async (c) => ((await c.query("SELECT RELEASE_ALL_LOCKS() AS n"))[0] as Array<{ n: number }>)[0]?.n),
    );
    expect(released).toEqual([0, 0]);
    a.release();
    b.release();
    await pool.end();
    await eventually(async () => (await connections()) === 0);
    await held.release();
  });

  it("inspect: the holder's owner and the sessions waiting in GET_LOCK; hand-offs are unsupported", async () => {
    const holder = fixture.locker({ owner: "mysql-holder" });
    const waiter = fixture.locker();
    const inspector = fixture.locker();
    const key = uniqueKey("my-inspect");
    expect(await inspector.inspect(undefined, key)).toEqual({ key, holders: [], waiting: 0 });
    const lease = await holder.acquire(undefined, key);
    const waiting = waiter.lock(undefined, key);
    await untilWaiting(waiter, 1);
    // The waiter's probe blocks in GET_LOCK: the store sees it from another locker.
    await eventually(async () => (await inspector.inspect(undefined, key)).waiting === 1);
    const view = await inspector.inspect(undefined, key);
    expect(view.holders).toEqual([
      { owner: "mysql-holder", mode: "exclusive", weight: 1, expiresInMs: Number.POSITIVE_INFINITY },
    ]);
    // Two more waiting lockers: their probes wait in the key's waiting room, and count too.
    const more = [fixture.locker(), fixture.locker()];
    const moreWaiting = more.map((locker) => locker.lock(undefined, key));
    await eventually(async () => (await inspector.inspect(undefined, key)).waiting === 3);
    await expect(lease.handOff()).rejects.toBeInstanceOf(UnsupportedError);
    await lease.release();
    await Promise.all([waiting, ...moreWaiting].map(async (next) => (await next)()));
  });

  it("docs/fencing.md's MySQL statements: a stale token's conditional update and upsert are refused", async () => {
    const pool = fixture.pool(2);
    const locker = fixture.locker();
    const table = `fenced_orders_${process.pid}`;
    await pool.query(`CREATE TABLE ${table} (id INT PRIMARY KEY, status VARCHAR(20) NOT NULL, fence BIGINT NOT NULL)`);
    try {
      const key = uniqueKey("my-fenced");
      const stale = await locker.acquire(undefined, key, { fencing: true });
      const old = String(stale.fencingToken);
      await stale.release(); // say its holder paused past its lease: another took the lock
      const fresh = await locker.acquire(undefined, key, { fencing: true });
      const token = String(fresh.fencingToken);
      expect(BigInt(token)).toBeGreaterThan(BigInt(old));
      const update = `UPDATE ${table} SET status = ?, fence = ? WHERE id = ? AND fence <= ?`;
      // MariaDB (and MySQL before 8.0.19): VALUES() instead of a row alias; fence assigned last.
      const upsert =
        `INSERT INTO ${table} (id, status, fence) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE ` +
        `status = IF(${table}.fence <= VALUES(fence), VALUES(status), ${table}.status), ` +
        `fence = IF(${table}.fence <= VALUES(fence), VALUES(fence), ${table}.fence)`;
      const affected = async (sql: string, values: unknown[]): Promise<number> =>
        ((await pool.query(sql, values)) as unknown as [{ affectedRows: number }])[0].affectedRows;
      expect(await affected(upsert, [42, "new", token])).toBe(1); // inserted
      expect(await affected(update, ["paid", token, 42, token])).toBe(1);
      expect(await affected(update, ["stale", old, 42, old])).toBe(0); // refused
      // Refused: nothing changes. (mysql2 sets CLIENT_FOUND_ROWS: a row found unchanged counts 1.)
      expect(await affected(upsert, [42, "stale", old])).toBeLessThanOrEqual(1);
      const [afterStale] = (await pool.query(`SELECT status FROM ${table} WHERE id = 42`)) as unknown as [
        Array<{ status: string }>,
      ];
      expect(afterStale.map((row) => row.status)).toEqual(["paid"]);
      expect(await affected(upsert, [42, "shipped", token])).toBe(2); // updated
      const [rows] = (await pool.query(`SELECT status, fence FROM ${table} WHERE id = 42`)) as unknown as [
        Array<{ status: string; fence: string | number }>,
      ];
      expect(rows.map((row) => [row.status, String(row.fence)])).toEqual([["shipped", token]]);
      await fresh.release();
    } finally {
      await pool.query(`DROP TABLE ${table}`);
    }
  });
});
