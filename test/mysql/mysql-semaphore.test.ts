/**
 * MySqlSemaphore on one real MariaDB server: the semaphore contract with its peers in child
 * processes (each semaphore on a pool of its own), a SIGKILLed holder's permits back at once (its
 * connection dies with it), what `inspect` reads, and a connection given back clean.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Locker } from "../../src/index.js";
import {
  MAX_MYSQL_PERMITS,
  MYSQL_SEMAPHORE_PREFIX,
  MySqlSemaphore,
  type MySqlSemaphoreOptions,
} from "../../src/mysql/mysql-semaphore.js";
import { gateName, slotBase, slotName } from "../../src/mysql/semaphore-statements.js";
import { uniqueKey } from "../contracts/contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";
import { bundleChild, RemoteLocker } from "../helpers/remote-locker.js";

const CHILD = new URL("./semaphore-child.ts", import.meta.url).pathname;

/** A safety net so slow that only a probe's wake-up wakes a waiter in time. */
const wakeOnly = (options?: { wakeOnly?: boolean }) =>
  options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};

semaphoreContract("MySqlSemaphore (peer: a MySqlSemaphore in a child process)", async () => {
  const fixture = await MySqlFixture.start();
  const bundle = await bundleChild(CHILD);
  const limits = new WeakMap<Locker, number>();
  const local: MySqlSemaphore[] = [];
  const remote: RemoteLocker[] = [];
  return {
    create: async ({ limit, ...options }) => {
      const semaphore = new MySqlSemaphore(fixture.pool(), { limit, ...wakeOnly(options) });
      local.push(semaphore);
      limits.set(semaphore, limit);
      return semaphore;
    },
    peer: async (locker, options) => {
      const limit = limits.get(locker) ?? 1;
      const given: MySqlSemaphoreOptions = { limit, ...wakeOnly(options) };
      const child = await RemoteLocker.ofBundle(bundle.path, { connection: fixture.server.connection, options: given });
      remote.push(child);
      limits.set(child, limit);
      return child;
    },
    expires: true,
    cleanup: async () => {
      await Promise.allSettled([...local.map((s) => s.close()), ...remote.map((r) => r.stop())]);
      bundle.remove();
      await fixture.stop();
    },
  };
});

describe("MySqlSemaphore specifics", () => {
  let fixture: MySqlFixture;
  let bundle: Awaited<ReturnType<typeof bundleChild>>;
  const closables: Array<{ close(): Promise<void> }> = [];
  beforeAll(async () => {
    [fixture, bundle] = await Promise.all([MySqlFixture.start(), bundleChild(CHILD)]);
  });
  afterAll(async () => {
    await Promise.allSettled(closables.map((c) => c.close()));
    bundle?.remove();
    await fixture?.stop();
  });

  it("a SIGKILLed holder's permits are back at once (its connection dies with it), and inspect reads holders by connection", async () => {
    const options: MySqlSemaphoreOptions = { limit: 3 };
    const child = await RemoteLocker.ofBundle(bundle.path, { connection: fixture.server.connection, options });
    const here = new MySqlSemaphore(fixture.pool(), options);
    closables.push(here);
    const key = uniqueKey("sem-kill");
    await child.acquire(undefined, key, { weight: 2 });
    const mine = await here.acquire(undefined, key);
    const info = await here.inspect(undefined, key);
    expect(info.holders.map((holder) => [holder.weight, holder.mode]).sort()).toEqual([
      [1, "shared"],
      [2, "shared"],
    ]);
    const waiting = here.acquire(AbortSignal.timeout(10_000), key, { weight: 2 });
    await child.kill();
    const lease = await waiting;
    // One holder: the leases of one semaphore share its connection.
    expect((await here.inspect(undefined, key)).holders).toEqual([
      expect.objectContaining({ weight: 3, mode: "exclusive" }),
    ]);
    await Promise.all([lease.release(), mine.release()]);
  });

  it("gives its connection back to the pool, with no lock on it, once everything is released", async () => {
    const pool = fixture.pool(1);
    const idOf = async (): Promise<number> => {
      const connection = await pool.getConnection();
      const [[row]] = (await connection.query("SELECT CONNECTION_ID() AS id")) as unknown as [[{ id: number }]];
      connection.release();
      return Number(row.id);
    };
    const before = await idOf();
    const semaphore = new MySqlSemaphore(pool, { limit: 2 });
    const key = uniqueKey("sem-clean");
    const lease = await semaphore.acquire(undefined, key, { weight: 2 });
    await lease.release();
    await semaphore.close();
    const connection = await pool.getConnection();
    try {
      const base = slotBase(MYSQL_SEMAPHORE_PREFIX + key);
      const [[row]] = (await connection.query(
        "SELECT CONNECTION_ID() AS id, IS_USED_LOCK(?) AS slot0, IS_USED_LOCK(?) AS slot1, IS_USED_LOCK(?) AS gate",
        [slotName(base, 0), slotName(base, 1), gateName(MYSQL_SEMAPHORE_PREFIX + key)],
      )) as unknown as [[{ id: number; slot0: unknown; slot1: unknown; gate: unknown }]];
      expect(row).toEqual({ id: before, slot0: null, slot1: null, gate: null });
    } finally {
      connection.release();
    }
  });

  it("limit is required: an integer from 1 to the cap, else an InvalidArgumentError naming it", () => {
    const pool = fixture.pool();
    for (const limit of [0, 1.5, "2", undefined, MAX_MYSQL_PERMITS + 1]) {
      expect(() => new MySqlSemaphore(pool, { limit: limit as number })).toThrow(/options\.limit/);
    }
  });
});
