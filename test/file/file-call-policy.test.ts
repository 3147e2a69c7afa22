import { pbkdf2 } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CallPolicy, inMemoryFileSystem, isMemoryFileSystemType } from "../../src/file/call-policy.js";
import { SYNC_CALLS, THREAD_POOL_CALLS } from "../../src/file/calls.js";
import { FileLocker } from "../../src/index.js";
import { tempLockDirectory } from "../helpers/file-harness.js";

/** libuv's thread pool size in this process (Node.js reads `UV_THREADPOOL_SIZE` at start; default 4). */
const POOL_THREADS = Number(process.env.UV_THREADPOOL_SIZE ?? 4) || 4;
/** A tmpfs every Linux host has. */
const SHM = "/dev/shm";

/**
 * Keeps every thread of libuv's thread pool busy (one PBKDF2 job each, long enough for a few
 * synchronous file-system calls many times over), so that a call sent through the pool cannot run
 * before the jobs end. `done()` tells how many jobs ended so far; `finished` settles when all did.
 */
function fillThreadPool(): { done: () => number; finished: Promise<void> } {
  let done = 0;
  const jobs = Array.from(
    { length: POOL_THREADS },
    () =>
      new Promise<void>((resolve, reject) =>
        pbkdf2("password", "salt", 300_000, 32, "sha256", (error) => {
          done += 1;
          if (error) reject(error);
          else resolve();
        }),
      ),
  );
  return { done: () => done, finished: Promise.all(jobs).then(() => undefined) };
}

/**
 * Whether a lock + release of `locker` (its directory already prepared) ran while every thread of
 * the pool was busy, that is without a trip through the pool.
 */
async function lockedBesideBusyPool(locker: FileLocker): Promise<boolean> {
  const pool = fillThreadPool();
  await (await locker.lock(undefined, "k"))();
  const besides = pool.done() === 0;
  await pool.finished;
  return besides;
}

describe("FileLocker syncCalls: where the calls run", () => {
  const directories: string[] = [];
  const lockers: FileLocker[] = [];
  const make = (directory: string, syncCalls?: boolean): FileLocker => {
    directories.push(directory);
    const locker = new FileLocker(syncCalls === undefined ? { directory } : { directory, syncCalls });
    lockers.push(locker);
    return locker;
  };
  afterAll(async () => {
    await Promise.all(lockers.map((locker) => locker.close()));
    for (const directory of directories) rmSync(directory, { recursive: true, force: true });
  });

  it("tells file systems in memory from disks, network and FUSE ones by their statfs magic", async () => {
    expect(isMemoryFileSystemType(0x01021994)).toBe(true); // tmpfs
    expect(isMemoryFileSystemType(0x858458f6)).toBe(true); // ramfs
    expect(isMemoryFileSystemType(0xef53)).toBe(false); // ext4
    expect(isMemoryFileSystemType(0x58465342)).toBe(false); // XFS
    expect(isMemoryFileSystemType(0x6969)).toBe(false); // NFS
    expect(isMemoryFileSystemType(0x65735546)).toBe(false); // FUSE
    const directory = tempLockDirectory("calls");
    directories.push(directory);
    expect(await inMemoryFileSystem(join(directory, "missing"))).toBe(false);
    if (process.platform === "linux" && existsSync(SHM)) expect(await inMemoryFileSystem(SHM)).toBe(true);
    if (process.platform !== "linux") expect(await inMemoryFileSystem(directory)).toBe(false);
  });

  it('takes true, false or "auto", and names anything else in its error', () => {
    const directory = tempLockDirectory("calls");
    directories.push(directory);
    lockers.push(new FileLocker({ directory, syncCalls: "auto" }));
    expect(() => new FileLocker({ directory, syncCalls: "always" as never })).toThrow(
      /options\.syncCalls.*true, false or "auto".*always/,
    );
  });

  it("true calls synchronously, false through the thread pool, and both through the pool while busy", () => {
    const always = new CallPolicy(true);
    expect(always.calls(false)).toBe(SYNC_CALLS);
    expect(always.calls(true)).toBe(THREAD_POOL_CALLS);
    const never = new CallPolicy(false);
    expect(never.calls(false)).toBe(THREAD_POOL_CALLS);
    const auto = new CallPolicy("auto");
    expect(auto.calls(false)).toBe(THREAD_POOL_CALLS); // not told yet: as on a disk
    auto.inMemory = true;
    expect(auto.calls(false)).toBe(SYNC_CALLS);
    expect(auto.calls(true)).toBe(THREAD_POOL_CALLS);
  });

  it.runIf(process.platform === "linux" && existsSync(SHM))(
    'by default ("auto") a lock + release on tmpfs does not wait for a busy thread pool; false does',
    async () => {
      const directory = mkdtempSync(join(SHM, "globallock-test-calls-"));
      const auto = make(directory);
      const pooled = make(directory, false);
      // Each directory is prepared (through the pool) before the pool is filled.
      for (const locker of [auto, pooled]) await (await locker.lock(undefined, "warm"))();
      expect(await lockedBesideBusyPool(auto)).toBe(true);
      expect(await lockedBesideBusyPool(pooled)).toBe(false);
    },
  );

  it('by default ("auto") a lock + release on a disk waits for the thread pool; true does not', async () => {
    const directory = tempLockDirectory("calls");
    const onDisk = !(await inMemoryFileSystem(directory));
    const auto = make(directory);
    const sync = make(directory, true);
    for (const locker of [auto, sync]) await (await locker.lock(undefined, "warm"))();
    expect(await lockedBesideBusyPool(auto)).toBe(!onDisk);
    expect(await lockedBesideBusyPool(sync)).toBe(true);
  });
});
