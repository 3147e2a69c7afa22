import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileLocker, type FileLockerOptions, FileReadWriteLocker } from "../../src/index.js";
import type { LockerHarness } from "../contract.js";
import type { ReadWriteHarness } from "../read-write-contract.js";

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
  return async () => {
    const directory = tempLockDirectory();
    const made: FileLocker[] = [];
    const make = (options?: { wakeOnly?: boolean }): FileLocker => {
      const locker = new FileLocker({
        directory,
        ...base,
        ...(options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {}),
      });
      made.push(locker);
      return locker;
    };
    return {
      create: async (options) => make(options),
      peer: async (_locker, options) => make(options),
      fencing: true,
      cleanup: async () => {
        await Promise.all(made.map((locker) => locker.close()));
        rmSync(directory, { recursive: true, force: true });
      },
    };
  };
}

/**
 * The read-write contract harness of {@link FileReadWriteLocker}: every locker of one harness
 * shares one temporary directory, so a `peer` is another locker on it (as another process would be).
 */
export function fileReadWriteHarness(base: FileLockerOptions = {}): () => Promise<ReadWriteHarness> {
  return async () => {
    const directory = tempLockDirectory("rw");
    const made: FileReadWriteLocker[] = [];
    const make = (options?: { wakeOnly?: boolean }): FileReadWriteLocker => {
      const locker = new FileReadWriteLocker({
        directory,
        ...base,
        ...(options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {}),
      });
      made.push(locker);
      return locker;
    };
    return {
      create: async (options) => make(options),
      peer: async (_locker, options) => make(options),
      fencing: true,
      cleanup: async () => {
        await Promise.all(made.map((locker) => locker.close()));
        rmSync(directory, { recursive: true, force: true });
      },
    };
  };
}
