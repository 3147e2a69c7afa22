/**
 * The shared contract suites against PostgresReadWriteLocker on one real PostgreSQL server: the
 * read-write contract, and the lock contract on its write view. Each locker has its own pool, like
 * a separate process. Then what PostgreSQL adds: a writer giving up leaves no mark behind, and a
 * reader's killed session loses its lease, and write fencing tokens rise across a crash.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type LockLostError,
  type PostgresLockerOptions,
  PostgresReadWriteLocker,
  StoreUnavailableError,
} from "../../src/index.js";
import { type LockerHarness, lockerContract, uniqueKey, whenAborted } from "../contracts/contract.js";
import { type ReadWriteHarness, readWriteContract } from "../contracts/read-write-contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

/** Read-write lockers on a PostgreSQL server of their own (stopped by `cleanup`). */
async function readWriteLockers(): Promise<{
  create(options?: { wakeOnly?: boolean }): PostgresReadWriteLocker;
  cleanup(): Promise<void>;
}> {
  const fixture = await PostgresFixture.start();
  const made: PostgresReadWriteLocker[] = [];
  return {
    create(options) {
      const given: PostgresLockerOptions = options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};
      const rw = new PostgresReadWriteLocker(fixture.pool(), given);
      made.push(rw);
      return rw;
    },
    async cleanup() {
      await Promise.allSettled(made.map((rw) => rw.close()));
      await fixture.stop();
    },
  };
}

readWriteContract("PostgresReadWriteLocker", async (): Promise<ReadWriteHarness> => {
  const lockers = await readWriteLockers();
  return {
    create: async (options) => lockers.create(options),
    peer: async (_rw, options) => lockers.create(options),
    fencing: true,
    cleanup: () => lockers.cleanup(),
  };
});

lockerContract("PostgresReadWriteLocker write view", async (): Promise<LockerHarness> => {
  const lockers = await readWriteLockers();
  return {
    create: async (options) => lockers.create(options).write,
    peer: async (_locker, options) => lockers.create(options).write,
    fencing: true,
    cleanup: () => lockers.cleanup(),
  };
});

describe("PostgresReadWriteLocker specifics", () => {
  let fixture: PostgresFixture;
  const made: PostgresReadWriteLocker[] = [];
  const create = (): PostgresReadWriteLocker => {
    const rw = new PostgresReadWriteLocker(fixture.pool());
    made.push(rw);
    return rw;
  };

  beforeAll(async () => {
    fixture = await PostgresFixture.start();
  });
  afterAll(async () => {
    await Promise.allSettled(made.map((rw) => rw.close()));
    await fixture?.stop();
  });

  it("a writer that gives up waiting leaves no mark: readers of other sessions get in again", async () => {
    const [rw, other] = [create(), create()];
    const key = uniqueKey("pg-rw");
    const reader = await rw.read.acquire(undefined, key);
    const signal = AbortSignal.timeout(150);
    const writer = await other.write.acquire(signal, key).catch((e: unknown) => e);
    expect(writer).toBe(signal.reason);
    await eventually(async () => {
      const late = await rw.read.tryAcquire(undefined, key);
      await late?.release();
      return late !== undefined;
    }, 2000);
    await reader.release();
  });

  it("pg_terminate_backend of a reader's session: its lease is lost (taken) and a waiting writer gets in", async () => {
    const [rw, other] = [create(), create()];
    const key = uniqueKey("pg-rw");
    const reader = await rw.read.acquire(undefined, key);
    const writing = other.write.acquire(AbortSignal.timeout(5000), key);
    await sleep(50);
    const [row] = await fixture.server.query<{ pid: number }>(
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND mode = 'ShareLock'",
    );
    expect(row).toBeDefined();
    await fixture.server.query("SELECT pg_terminate_backend($1)", [row?.pid]);
    expect(((await whenAborted(reader.lost)) as LockLostError).reason).toBe("taken");
    const writer = await writing;
    expect(await rw.read.tryAcquire(undefined, key)).toBeUndefined();
    expect(await writer.releaseWithOutcome()).toBe("released");
    expect(await reader.releaseWithOutcome()).toBe("expired");
  });

  it("the server SIGKILLed (kill -9) and started again: the write lease is lost, fencing tokens keep rising", async () => {
    const rw = create();
    const key = uniqueKey("pg-rw");
    const before = await rw.write.acquire(undefined, key, { fencing: true });
    await fixture.server.kill();
    expect(((await whenAborted(before.lost)) as LockLostError).reason).toBe("taken");
    await fixture.server.restart();
    await eventually(async () => {
      try {
        const after = await rw.write.acquire(AbortSignal.timeout(1000), key, { fencing: true });
        expect(after.fencingToken).toBeGreaterThan(before.fencingToken as bigint);
        await after.release();
        return true;
      } catch (error) {
        if (error instanceof StoreUnavailableError) return false;
        throw error;
      }
    });
    expect(await before.releaseWithOutcome()).toBe("expired");
  });
});
