/**
 * The file-system calls a {@link FileStore} takes and releases locks with, made on the event loop
 * (synchronous) or through libuv's thread pool (see `FileLockerOptions.syncCalls`). Both reject
 * with Node.js's system errors (`code`: `ENOENT`, `ENOTEMPTY`, …); only where the call runs differs.
 */
import { mkdirSync, readdirSync, renameSync, rmdirSync } from "node:fs";
import { mkdir, readdir, rename, rmdir } from "node:fs/promises";

/** The calls of a store's takes, releases and extensions. */
export interface FileCalls {
  mkdir(path: string): Promise<unknown>;
  rename(from: string, to: string): Promise<void>;
  rmdir(path: string): Promise<void>;
  readdir(path: string): Promise<string[]>;
}

/** Each call through libuv's thread pool (`node:fs/promises`). */
export const THREAD_POOL_CALLS: FileCalls = { mkdir, rename, rmdir, readdir };

/** Each call on the event loop: no trip through the thread pool, which costs more than the call. */
export const SYNC_CALLS: FileCalls = {
  mkdir: (path) => settle(() => mkdirSync(path)),
  rename: (from, to) => settle(() => renameSync(from, to)),
  rmdir: (path) => settle(() => rmdirSync(path)),
  readdir: (path) => settle(() => readdirSync(path)),
};

/** `call()`'s result as a promise: resolved with its value, or rejected with what it threw. */
function settle<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}
