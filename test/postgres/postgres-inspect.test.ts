/**
 * What #19 adds on PostgreSQL, on one real server (each locker on its own pool, like a process of
 * its own): `inspect` across lockers (owners from the sessions' application_name, waiting
 * sessions counted, shared and exclusive holders of a read-write key), hand-off refused with the
 * reason, and the fenced SQL writes of examples/fenced-sql.mjs (a stale token's write is refused).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeHandOff } from "../../src/core/hand-off-handle.js";
import { PostgresReadWriteLocker, UnsupportedError } from "../../src/index.js";
import { assertBuilt } from "../helpers/cli.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";

const run = promisify(execFile);
let fixture: PostgresFixture;
const readWriteLockers: PostgresReadWriteLocker[] = [];

beforeAll(async () => {
  fixture = await PostgresFixture.start();
});
afterAll(async () => {
  await Promise.allSettled(readWriteLockers.map((rw) => rw.close()));
  await fixture?.stop();
});

describe("PostgresLocker inspect and hand-off", () => {
  it("inspect shows the holder's owner from another pool, held until released, and counts waiting sessions", async () => {
    const [alpha, beta, gamma, observer] = [
      fixture.locker({ owner: "alpha:1" }),
      fixture.locker({ owner: "beta" }),
      fixture.locker({ owner: "gamma" }),
      fixture.locker(),
    ];
    expect(await observer.inspect(undefined, "k")).toEqual({ key: "k", holders: [], waiting: 0 });
    const lease = await alpha.acquire(undefined, "k", { fencing: true });
    const waiters = [beta, gamma].map((locker) => locker.acquire(AbortSignal.timeout(30_000), "k"));
    // Each waiting locker's session holds the key's waiter marker: two sessions wait.
    await expect.poll(async () => (await observer.inspect(undefined, "k")).waiting, { timeout: 10_000 }).toBe(2);
    const info = await observer.inspect(undefined, "k");
    // No fencing token per holder: PostgreSQL keeps none beside the lock.
    expect(info.holders).toEqual([
      { owner: "alpha:1", mode: "exclusive", weight: 1, expiresInMs: Number.POSITIVE_INFINITY },
    ]);
    await lease.release();
    const next = await Promise.race(waiters);
    const after = await observer.inspect(undefined, "k");
    expect(after.holders).toHaveLength(1);
    expect(["beta", "gamma"]).toContain(after.holders[0]?.owner);
    // The winner drops its waiter marker right after its grant: one session is left waiting.
    await expect.poll(async () => (await observer.inspect(undefined, "k")).waiting, { timeout: 10_000 }).toBe(1);
    await next.release();
    for (const waiter of await Promise.allSettled(waiters)) {
      if (waiter.status === "fulfilled") await waiter.value.release();
    }
  });

  it("a long owner shows as its first 63 bytes (application_name's limit); the default is hostname:pid", async () => {
    const long = `${"x".repeat(60)}-and-more`;
    const [owner, plain, observer] = [fixture.locker({ owner: long }), fixture.locker(), fixture.locker()];
    const leases = [await owner.acquire(undefined, "long"), await plain.acquire(undefined, "plain")];
    expect((await observer.inspect(undefined, "long")).holders[0]?.owner).toBe(long.slice(0, 63));
    const { hostname } = await import("node:os");
    expect((await observer.inspect(undefined, "plain")).holders[0]?.owner).toBe(
      `${hostname()}:${process.pid}`.slice(0, 63),
    );
    for (const lease of leases) await lease.release();
  });

  it("handOff and adopt are UnsupportedErrors saying a session lock belongs to its connection", async () => {
    const locker = fixture.locker();
    const lease = await locker.acquire(undefined, "session-bound");
    await expect(lease.handOff()).rejects.toThrow(UnsupportedError);
    await expect(lease.handOff()).rejects.toThrow(/belongs to the session \(connection\) that took it/);
    // The lease is still held and kept after the refused hand-off.
    lease.assertHeld();
    const handle = encodeHandOff({
      scope: "postgres-lock|postgres",
      key: "session-bound",
      token: "t",
      weight: 1,
      duration: 30_000,
      fencingToken: undefined,
    });
    await expect(locker.adopt(undefined, handle)).rejects.toThrow(UnsupportedError);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });
});

describe("PostgresReadWriteLocker inspect", () => {
  it("shows readers of two lockers as shared holders and a waiting writer's session", async () => {
    const make = (owner: string): PostgresReadWriteLocker => {
      const rw = new PostgresReadWriteLocker(fixture.pool(), { owner });
      readWriteLockers.push(rw);
      return rw;
    };
    const [r1, r2, w] = [make("reader one"), make("reader two"), make("writer")];
    const reads = [await r1.read.acquire(undefined, "doc"), await r2.read.acquire(undefined, "doc")];
    const writing = w.write.acquire(AbortSignal.timeout(30_000), "doc");
    await expect.poll(async () => (await r1.read.inspect(undefined, "doc")).waiting, { timeout: 10_000 }).toBe(1);
    const info = await w.write.inspect(undefined, "doc");
    const shared = { mode: "shared", weight: 1, expiresInMs: Number.POSITIVE_INFINITY };
    expect([...info.holders].sort((x, y) => x.owner.localeCompare(y.owner))).toEqual([
      { owner: "reader one", ...shared },
      { owner: "reader two", ...shared },
    ]);
    for (const lease of reads) await lease.release();
    const written = await writing;
    expect((await r2.read.inspect(undefined, "doc")).holders).toEqual([
      { owner: "writer", mode: "exclusive", weight: 1, expiresInMs: Number.POSITIVE_INFINITY },
    ]);
    await written.release();
  });
});

describe("examples/fenced-sql.mjs: fenced writes on PostgreSQL (needs the build)", () => {
  it("the stale holder's UPDATE and upsert are refused; the newer token's are taken", async () => {
    assertBuilt();
    const { stdout } = await run(process.execPath, ["examples/fenced-sql.mjs"], {
      env: { ...process.env, DATABASE_URL: fixture.server.url },
    });
    const tokenA = /A holds the lock with fencing token (\d+)/.exec(stdout)?.[1];
    const tokenB = /B holds the lock with fencing token (\d+)/.exec(stdout)?.[1];
    expect(BigInt(tokenB as string)).toBeGreaterThan(BigInt(tokenA as string));
    expect(stdout).toMatch(/B holds the lock with fencing token \d+: UPDATE accepted/);
    expect(stdout).toMatch(/A wakes up with token \d+: UPDATE rejected/);
    expect(stdout).toMatch(/upsert with token \d+: accepted; with token \d+: rejected/);
    expect(stdout).toContain(`order 42: status = "delivered by B", fence = ${tokenB}`);
    // The example dropped its table.
    const pool = fixture.pool(1);
    const { rows } = await pool.query("SELECT to_regclass('fenced_orders_example') AS t");
    expect(rows[0].t).toBeNull();
  });
});
