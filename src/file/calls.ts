/**
 * The file-system calls a {@link FileStore} takes and releases locks with, made on the event loop
 * (synchronous) or through libuv's thread pool (see `FileLockerOptions.syncCalls`). Both reject
 * with Node.js's system errors (`code`: `ENOENT`, `ENOTEMPTY`, …); only where the call runs differs.
 */
import { mkdir, mkdirSync, readdir, readdirSync, rename, renameSync, rmdir, rmdirSync } from "node:fs";

/** The calls of a store's takes, releases and extensions. */
export interface FileCalls {
  mkdir(path: string): Promise<unknown>;
  rename(from: string, to: string): Promise<void>;
  rmdir(path: string): Promise<void>;
  readdir(path: string): Promise<string[]>;
}

/**
 * Each call through libuv's thread pool: `node:fs`'s callback functions, each wrapped in one
 * promise: `node:fs/promises` makes several promises per call, and a typed array for a stat result
 * that these calls never have (docs/benchmarks.md, "What each speed choice buys").
 */
export const THREAD_POOL_CALLS: FileCalls = {
  mkdir: (path) =>
    new Promise((resolve, reject) => mkdir(path, (error) => (error ? reject(error) : resolve(undefined)))),
  rename: (from, to) =>
    new Promise((resolve, reject) => rename(from, to, (error) => (error ? reject(error) : resolve()))),
  rmdir: (path) => new Promise((resolve, reject) => rmdir(path, (error) => (error ? reject(error) : resolve()))),
  readdir: (path) =>
    new Promise((resolve, reject) => readdir(path, (error, names) => (error ? reject(error) : resolve(names)))),
};

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
