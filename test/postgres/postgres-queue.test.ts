/**
 * PostgresLocker's waiting rooms: lockers waiting for one key take turns in arrival order, kept by
 * PostgreSQL's own lock queue (a place per waiting locker, on a pool connection, blocked in
 * `pg_advisory_lock` on the key's room), instead of all trying on every release.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidArgumentError, type PostgresLocker } from "../../src/index.js";
import { lockIdText } from "../../src/postgres/keys.js";
import { uniqueKey } from "../contracts/contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

let fixture: PostgresFixture;
beforeAll(async () => {
  fixture = await PostgresFixture.start();
});
afterAll(async () => {
  await fixture?.stop();
});

/** Places in `key`'s waiting room (the one holding it and those queued), as `pg_locks` shows them. */
async function placesIn(key: string): Promise<number> {
  const room = lockIdText(`globallock:${key}\u0000room`);
  const [row] = await fixture.server.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $1::bigint",
    [room],
  );
  return Number(row?.n);
}

/** Backends with a place in `key`'s room: the one holding it (`granted`), or those queued, in queue order. */
async function roomPids(key: string, granted: boolean): Promise<number[]> {
  const room = lockIdText(`globallock:${key}\u0000room`);
  const rows = await fixture.server.query<{ pid: number }>(
    `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint
       AND l.granted = $2 ORDER BY a.query_start`,
    [room, granted],
  );
  return rows.map((row) => row.pid);
}

/**
 * Each locker in turn calls `lock` on `key` and takes its place in the key's room before the next
 * one calls: the arrival order. Each pushes its index to `order` once it holds the key, holds it a
 * little, and releases. Resolves to the calls.
 */
async function queueInTurn(lockers: PostgresLocker[], key: string, order: number[]): Promise<Array<Promise<void>>> {
  const calls: Array<Promise<void>> = [];
  for (const [i, locker] of lockers.entries()) {
    const call = locker.lock(AbortSignal.timeout(20_000), key).then(async (release) => {
      order.push(i);
      await sleep(10);
      await release();
    });
    call.catch(() => undefined);
    calls.push(call);
    await eventually(async () => (await placesIn(key)) === i + 1, 10_000);
  }
  return calls;
}

/**
 * A key held here, and three lockers (polling only every 20 s) queued for it in its room in turn:
 * the first is the head.
 */
async function threeInLine() {
  const key = uniqueKey("pg-room");
  const release = await fixture.locker().lock(undefined, key);
  const order: number[] = [];
  const lockers = Array.from({ length: 3 }, () => fixture.locker({ backoff: { min: 20_000, max: 20_000 } }));
  const calls = await queueInTurn(lockers, key, order);
  return { key, release, order, calls };
}

describe("PostgresLocker: waiting rooms", () => {
  it("serves lockers waiting for one key in the order they came", async () => {
    const key = uniqueKey("pg-room");
    const holder = fixture.locker();
    const release = await holder.lock(undefined, key);
    const order: number[] = [];
    // Waiters that poll only every 20 s: each try is one the room let in (a poll, the safety net,
    // may land between a release and the head's try, and overtake; on a loaded machine it did).
    const calls = await queueInTurn(
      Array.from({ length: 6 }, () => fixture.locker({ backoff: { min: 20_000, max: 20_000 } })),
      key,
      order,
    );
    await release();
    await Promise.all(calls);
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    // Every place left the room, and its connection went back to its pool.
    await eventually(async () => (await placesIn(key)) === 0);
  });

  it("a locker that closes while it waits leaves the room at once; the others keep their order", async () => {
    const key = uniqueKey("pg-room");
    const holder = fixture.locker();
    const release = await holder.lock(undefined, key);
    const pools = [fixture.pool(), fixture.pool(), fixture.pool()];
    const lockers = pools.map((pool) => fixture.locker({ backoff: { min: 20_000, max: 20_000 } }, pool));
    const order: number[] = [];
    const calls = await queueInTurn(lockers, key, order);
    // The middle one gives up: its place is cancelled while it waits behind the first.
    await (lockers[1] as PostgresLocker).close();
    await expect(calls[1]).rejects.toMatchObject({ code: "ERR_GLOBALLOCK_CLOSED" });
    await eventually(async () => (await placesIn(key)) === 2);
    // Its pool has every connection back (the locker's session too: it held nothing).
    const pool = pools[1] as (typeof pools)[number];
    await eventually(() => pool.idleCount === pool.totalCount);
    await release();
    await Promise.all([calls[0], calls[2]]);
    expect(order).toEqual([0, 2]);
  });

  it("a waiter whose room connection is terminated queues again at the back: it never overtakes those in line", async () => {
    const { key, release, order, calls } = await threeInLine();
    // The second in line loses its place (as an operator's pg_terminate_backend, a pooler or an
    // idle timeout would end it); the process goes on (a destroyed connection's late error is
    // not unhandled), and the locker queues again behind the third.
    const queued = await roomPids(key, false);
    expect(queued).toHaveLength(2);
    const [second] = queued as [number, number];
    await fixture.server.query("SELECT pg_terminate_backend($1)", [second]);
    await eventually(async () => !(await roomPids(key, false)).includes(second));
    await eventually(async () => (await placesIn(key)) === 3);
    await release();
    await Promise.all(calls);
    expect(order).toEqual([0, 2, 1]);
  });

  it("the head whose room connection is terminated queues again behind the others (said in the reference)", async () => {
    const { key, release, order, calls } = await threeInLine();
    const [head] = await roomPids(key, true);
    await fixture.server.query("SELECT pg_terminate_backend($1)", [head]);
    await eventually(async () => !(await roomPids(key, true)).includes(head as number));
    await eventually(async () => (await placesIn(key)) === 3);
    await release();
    await Promise.all(calls);
    expect(order).toEqual([1, 2, 0]);
  });

  it("takes no place for a key its own locker holds: the release here wakes the waiter", async () => {
    const key = uniqueKey("pg-room");
    const locker = fixture.locker();
    const release = await locker.lock(undefined, key);
    const waiting = locker.lock(AbortSignal.timeout(10_000), key);
    await sleep(200);
    expect(await placesIn(key)).toBe(0);
    await release();
    await (await waiting)();
  });

  it("a head whose process froze gives up the room after expiry idle (the server ends its place's connection)", async () => {
    const key = uniqueKey("pg-room");
    const holder = fixture.locker();
    const release = await holder.lock(undefined, key);
    // Another process waits first (its place enters the room: the head), then freezes.
    const dist = resolve(import.meta.dirname, "../../dist/esm/index.js");
    const script = `
      import pg from "pg";
      import { PostgresLocker } from ${JSON.stringify(dist)};
      const pool = new pg.Pool(${JSON.stringify(fixture.server.connection)});
      pool.on("error", () => undefined);
      const locker = new PostgresLocker(pool, { expiry: 1000, backoff: { min: 60000, max: 60000 } });
      locker.lock(undefined, ${JSON.stringify(key)}).catch(() => undefined);
      process.stdout.write("waiting\\n");
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      await once(child.stdout, "data");
      await eventually(async () => (await placesIn(key)) === 1, 10_000);
      child.kill("SIGSTOP");
      // A waiter here that polls only every minute: only the room can hand it its turn.
      const waiter = fixture.locker({ expiry: 1000, backoff: { min: 60_000, max: 60_000 } });
      const waiting = waiter.lock(AbortSignal.timeout(15_000), key);
      waiting.catch(() => undefined);
      await eventually(async () => (await placesIn(key)) === 2, 10_000);
      await release();
      // The frozen head never tries; its place's connection sits idle past 1 s and the server ends
      // it, so the room passes on. (Without that bound this waiter would wait for its poll.)
      await (await waiting)();
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("waitingRooms: 0 takes no place, and the waiters still get the key", async () => {
    const key = uniqueKey("pg-room");
    const holder = fixture.locker();
    const release = await holder.lock(undefined, key);
    const waiters = [fixture.locker({ waitingRooms: 0 }), fixture.locker({ waitingRooms: 0 })];
    const calls = waiters.map((waiter) => waiter.lock(AbortSignal.timeout(10_000), key).then((r) => r()));
    await sleep(300);
    expect(await placesIn(key)).toBe(0);
    await release();
    await Promise.all(calls);
  });

  it("rejects a waitingRooms that is not a non-negative integer, naming it", () => {
    for (const bad of [-1, 1.5, "4", null]) {
      expect(() => fixture.locker({ waitingRooms: bad as number })).toThrow(InvalidArgumentError);
      expect(() => fixture.locker({ waitingRooms: bad as number })).toThrow(/options\.waitingRooms/);
    }
  });
});
