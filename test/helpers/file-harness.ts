import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileLocker, type FileLockerOptions, FileReadWriteLocker } from "../../src/index.js";
import type { LockerHarness } from "../contracts/contract.js";
import type { ReadWriteHarness } from "../contracts/read-write-contract.js";

/** A fresh, empty lock directory under the OS temporary directory (removed by the caller). */
export function tempLockDirectory(label = "file"): string {
  return mkdtempSync(join(tmpdir(), `globallock-test-${label}-`));
}

/**
 * The contract harness of {@link FileLocker}: every locker of one harness shares one temporary
 * directory, so a `peer` is another locker on the same directory (in this process; the tests with
 * a peer in a child process are in file-processes.test.ts). `wakeOnly` makes the safety-net
 * backoff 20 s, so only a release seen through `fs.watch` (or in-process) wakes a waiter in time.
 */
export function fileLockerHarness(base: FileLockerOptions = {}): () => Promise<LockerHarness> {
  return async () => sharedDirectory("file", (options) => new FileLocker(options), base);
}

/**
 * The read-write contract harness of {@link FileReadWriteLocker}: every locker of one harness
 * shares one temporary directory, so a `peer` is another locker on it (as another process would be).
 */
export function fileReadWriteHarness(base: FileLockerOptions = {}): () => Promise<ReadWriteHarness> {
  return async () => sharedDirectory("rw", (options) => new FileReadWriteLocker(options), base);
}

/**
 * A harness whose lockers (made by `construct`) all share one new temporary directory, removed by
 * `cleanup` after every locker is closed; `wakeOnly` makes the safety-net backoff 20 s. Lockers
 * take the default `syncCalls` (`"auto"`: synchronous calls on the local file system tests use),
 * peers `syncCalls: false` (calls through the thread pool), unless `base` says otherwise.
 */
function sharedDirectory<L extends { close(): Promise<void> }>(
  label: string,
  construct: (options: FileLockerOptions) => L,
  base: FileLockerOptions,
) {
  const directory = tempLockDirectory(label);
  const made: L[] = [];
  const make = (options?: { wakeOnly?: boolean }, peer = false): L => {
    const locker = construct({
      directory,
      // A peer calls through the thread pool, so that both kinds of calls meet in every test.
      ...(peer ? { syncCalls: false } : {}),
      ...base,
      ...(options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {}),
    });
    made.push(locker);
    return locker;
  };
  return {
    create: async (options?: { wakeOnly?: boolean }) => make(options),
    peer: async (_locker: unknown, options?: { wakeOnly?: boolean }) => make(options, true),
    fencing: true,
    handOff: true,
    cleanup: async () => {
      await Promise.all(made.map((locker) => locker.close()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
