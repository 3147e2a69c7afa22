/**
 * PostgresSemaphore with `limit: 1` is a lock: the lock contract on one real PostgreSQL server
 * (each semaphore on a pool of its own, like a separate process). And behind a real PgBouncer in
 * transaction mode, the pooler guard refuses, as PostgresLocker's does.
 */
import type { Pool } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UnsupportedError } from "../../src/index.js";
import { PostgresSemaphore } from "../../src/postgres/postgres-semaphore.js";
import { PgBouncerServer } from "../../support/pgbouncer-server.mjs";
import { PostgresServer } from "../../support/postgres-server.mjs";
import { lockerContract, uniqueKey } from "../contracts/contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";

/** A safety net so slow that only a NOTIFY wakes a waiter in time. */
const wakeOnly = (options?: { wakeOnly?: boolean }) =>
  options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};

lockerContract("PostgresSemaphore { limit: 1 }", async () => {
  const fixture = await PostgresFixture.start();
  const made: PostgresSemaphore[] = [];
  const make = (options?: { wakeOnly?: boolean }): PostgresSemaphore => {
    const semaphore = new PostgresSemaphore(fixture.pool(), { limit: 1, ...wakeOnly(options) });
    made.push(semaphore);
    return semaphore;
  };
  return {
    create: async (options) => make(options),
    peer: async (_locker, options) => make(options),
    fencing: true,
    cleanup: async () => {
      await Promise.allSettled(made.map((semaphore) => semaphore.close()));
      await fixture.stop();
    },
  };
});

describe("PostgresSemaphore behind PgBouncer (pool_mode=transaction)", () => {
  let server: PostgresServer;
  let pooler: PgBouncerServer;
  const pools: Pool[] = [];
  const semaphores: PostgresSemaphore[] = [];
  beforeAll(async () => {
    server = await PostgresServer.start();
    pooler = await PgBouncerServer.start(server, { poolMode: "transaction", poolSize: 3 });
  });
  afterAll(async () => {
    await Promise.allSettled(semaphores.map((semaphore) => semaphore.close()));
    await pooler?.stop();
    await server?.stop();
    await Promise.allSettled(pools.map((pool) => pool.end()));
  });

  it("refuses at its first attempt (UnsupportedError naming the pooler) and holds no slot anywhere", async () => {
    const pool = pooler.pool({ max: 4 });
    pools.push(pool);
    const semaphore = new PostgresSemaphore(pool, { limit: 3 });
    semaphores.push(semaphore);
    const error = await semaphore.tryAcquire(undefined, uniqueKey("pooled"), { weight: 2 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnsupportedError);
    expect((error as Error).message).toMatch(/transaction or statement mode/);
    const locks = await server.query("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted");
    expect(locks).toEqual([]);
  });
});
