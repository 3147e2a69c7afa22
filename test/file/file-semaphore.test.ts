/**
 * FileSemaphore: the semaphore contract with its peers in child processes, a SIGKILLed holder's
 * permits taken back, and what its files look like (apart from locks' of the same key name,
 * nothing left behind).
 */
import { readdirSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileSemaphore, type FileSemaphoreOptions } from "../../src/file/file-semaphore.js";
import { FileLocker, type Locker } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { bundleChild, RemoteLocker } from "../helpers/remote-locker.js";

const CHILD = new URL("./semaphore-child.ts", import.meta.url).pathname;

/** A safety net so slow that only an event in the directory wakes a waiter in time. */
const wakeOnly = (options?: { wakeOnly?: boolean }) =>
  options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};

semaphoreContract("FileSemaphore (peer: a FileSemaphore in a child process)", async () => {
  const directory = tempLockDirectory("sem-peer");
  const bundle = await bundleChild(CHILD);
  const limits = new WeakMap<Locker, number>();
  const local: FileSemaphore[] = [];
  const remote: RemoteLocker[] = [];
  return {
    create: async ({ limit, ...options }) => {
      const semaphore = new FileSemaphore({ directory, limit, ...wakeOnly(options) });
      local.push(semaphore);
      limits.set(semaphore, limit);
      return semaphore;
    },
    peer: async (locker, options) => {
      const limit = limits.get(locker) ?? 1;
      const options_: FileSemaphoreOptions = { directory, limit, ...wakeOnly(options) };
      const child = await RemoteLocker.ofBundle(bundle.path, options_);
      remote.push(child);
      limits.set(child, limit);
      return child;
    },
    expires: true,
    cleanup: async () => {
      await Promise.all([...local.map((s) => s.close()), ...remote.map((r) => r.stop())]);
      bundle.remove();
      rmSync(directory, { recursive: true, force: true });
    },
  };
});

describe("FileSemaphore specifics", () => {
  let directory: string;
  let bundle: Awaited<ReturnType<typeof bundleChild>>;
  const closables: Array<{ close(): Promise<void> }> = [];
  beforeAll(async () => {
    directory = tempLockDirectory("sem");
    bundle = await bundleChild(CHILD);
  });
  afterAll(async () => {
    await Promise.all(closables.map((c) => c.close()));
    bundle.remove();
    rmSync(directory, { recursive: true, force: true });
  });

  it("a SIGKILLed holder's permits are taken back (its process is gone): waiters get in", async () => {
    const child = await RemoteLocker.ofBundle(bundle.path, { directory, limit: 3 } satisfies FileSemaphoreOptions);
    const here = new FileSemaphore({ directory, limit: 3 });
    closables.push(here);
    const key = uniqueKey("sem-kill");
    await child.acquire(undefined, key, { weight: 2 });
    const waiting = here.acquire(AbortSignal.timeout(10_000), key, { weight: 2 });
    expect((await here.inspect(undefined, key)).holders.map((holder) => holder.weight)).toEqual([2]);
    await child.kill();
    const lease = await waiting;
    expect(here.stats.deadHolderTakeovers).toBe(1);
    expect((await here.inspect(undefined, key)).holders).toHaveLength(1);
    await lease.release();
  });

  it("never meets a lock or a read-write key of the same name, and leaves nothing but the fencing counter", async () => {
    const own = tempLockDirectory("sem-files");
    const semaphore = new FileSemaphore({ directory: own, limit: 1 });
    const locker = new FileLocker({ directory: own });
    const lease = await semaphore.acquire(undefined, "k", { fencing: true });
    expect(lease.fencingToken).toBe(1n);
    const lock = await locker.tryAcquire(undefined, "k", { fencing: true });
    expect(lock?.fencingToken).toBe(1n); // its own counter: the files are apart
    expect(await semaphore.tryAcquire(undefined, "k")).toBeUndefined();
    const info = await semaphore.inspect(undefined, "k");
    expect(info.holders).toEqual([expect.objectContaining({ weight: 1, mode: "exclusive", fencingToken: 1n })]);
    await Promise.all([lease.release(), lock?.release()]);
    await Promise.all([semaphore.close(), locker.close()]);
    expect(readdirSync(own).filter((name) => !name.endsWith(".fence"))).toEqual([]);
    rmSync(own, { recursive: true, force: true });
  });

  it("limit is required: a positive safe integer, else an InvalidArgumentError naming it", () => {
    for (const limit of [0, -1, 1.5, "2", undefined]) {
      expect(() => new FileSemaphore({ directory, limit: limit as number })).toThrow(/options\.limit/);
    }
  });
});
