/**
 * PostgresSemaphore on one real PostgreSQL server: the semaphore contract with its peers in child
 * processes (each semaphore on a pool of its own), a SIGKILLed holder's permits back at once (its
 * session dies with it), and what `inspect` reads. The lock contract at limit 1:
 * postgres-semaphore-lock.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Locker } from "../../src/index.js";
import {
  MAX_POSTGRES_PERMITS,
  PostgresSemaphore,
  type PostgresSemaphoreOptions,
} from "../../src/postgres/postgres-semaphore.js";
import { uniqueKey } from "../contracts/contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { bundleChild, RemoteLocker } from "../helpers/remote-locker.js";

const CHILD = new URL("./semaphore-child.ts", import.meta.url).pathname;

/** A safety net so slow that only a NOTIFY wakes a waiter in time. */
const wakeOnly = (options?: { wakeOnly?: boolean }) =>
  options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};

semaphoreContract("PostgresSemaphore (peer: a PostgresSemaphore in a child process)", async () => {
  const fixture = await PostgresFixture.start();
  const bundle = await bundleChild(CHILD);
  const limits = new WeakMap<Locker, number>();
  const local: PostgresSemaphore[] = [];
  const remote: RemoteLocker[] = [];
  return {
    create: async ({ limit, ...options }) => {
      const semaphore = new PostgresSemaphore(fixture.pool(), { limit, ...wakeOnly(options) });
      local.push(semaphore);
      limits.set(semaphore, limit);
      return semaphore;
    },
    peer: async (locker, options) => {
      const limit = limits.get(locker) ?? 1;
      const given: PostgresSemaphoreOptions = { limit, ...wakeOnly(options) };
      const child = await RemoteLocker.ofBundle(bundle.path, { connection: fixture.server.connection, options: given });
      remote.push(child);
      limits.set(child, limit);
      return child;
    },
    expires: true,
    cleanup: async () => {
      await Promise.all([...local.map((s) => s.close()), ...remote.map((r) => r.stop())]);
      bundle.remove();
      await fixture.stop();
    },
  };
});

describe("PostgresSemaphore specifics", () => {
  let fixture: PostgresFixture;
  let bundle: Awaited<ReturnType<typeof bundleChild>>;
  const closables: Array<{ close(): Promise<void> }> = [];
  beforeAll(async () => {
    [fixture, bundle] = await Promise.all([PostgresFixture.start(), bundleChild(CHILD)]);
  });
  afterAll(async () => {
    await Promise.allSettled(closables.map((c) => c.close()));
    bundle?.remove();
    await fixture?.stop();
  });

  it("a SIGKILLed holder's permits are back at once (its session dies with it), and inspect reads holders by session", async () => {
    const options: PostgresSemaphoreOptions = { limit: 3 };
    const child = await RemoteLocker.ofBundle(bundle.path, { connection: fixture.server.connection, options });
    const here = new PostgresSemaphore(fixture.pool(), options);
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
    // One holder: the leases of one semaphore share its session.
    expect((await here.inspect(undefined, key)).holders).toEqual([
      expect.objectContaining({ weight: 3, mode: "exclusive" }),
    ]);
    await Promise.all([lease.release(), mine.release()]);
  });

  it("limit is required: an integer from 1 to the cap, else an InvalidArgumentError naming it", () => {
    const pool = fixture.pool();
    for (const limit of [0, 1.5, "2", undefined, MAX_POSTGRES_PERMITS + 1]) {
      expect(() => new PostgresSemaphore(pool, { limit: limit as number })).toThrow(/options\.limit/);
    }
  });
});
