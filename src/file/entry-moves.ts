/**
 * The renames and removals of one entry in a directory of a {@link FileStore} (a lock, the
 * readers of a read-write key, a semaphore's weight directory), for operations in one of the
 * store's slots. Each acts on the entry's name, which the file system changes atomically and only
 * while it exists: a compare-and-set without a lock (see `store.ts`).
 */
import { sep } from "node:path";
import { type Entry, entryOf, remainingMs } from "./entry.js";
import { codeOf, isGone } from "./fs-errors.js";
import type { FileStore } from "./store.js";

/**
 * The path of `name` (one path component: an entry's or a lock's name) in the directory `dir`
 * (an absolute, normalized path not ending in a separator): what `path.join` answers, without its
 * normalization pass (the paths of a take and a release are built on every call).
 */
export function under(dir: string, name: string): string {
  return `${dir}${sep}${name}`;
}

/**
 * Removes a stale entry of `dir`: exactly one of the contenders that found it succeeds (true);
 * false when it was gone (removed by another, or renamed by an extension that came first).
 * Counted in `store.stats`.
 */
export async function removeStale(store: FileStore, dir: string, stale: Entry): Promise<boolean> {
  const dead = remainingMs(stale) > 0;
  try {
    await store.fs.rmdir(under(dir, stale.name));
    store.stats.staleTakeovers += 1;
    if (dead) store.stats.deadHolderTakeovers += 1;
    return true;
  } catch (error) {
    if (codeOf(error) !== "ENOENT") throw store.unavailable("take over a stale lock in", error);
    store.stats.lostTakeoverRaces += 1;
    return false;
  }
}

/**
 * Renames `entry` of `dir` to a new deadline, `expiry` ms from now: the new entry, or `undefined`
 * when it is gone. The new entry keeps the owner, the key and the fencing token (unless `fence`
 * replaces it); `detached`: it names no process (a lease handed off: the process that writes it
 * may exit). `operation` says what failed in a StoreUnavailableError.
 */
export async function moveEntry(
  store: FileStore,
  dir: string,
  entry: Entry,
  expiry: number,
  operation: string,
  fence = entry.fence,
  detached = false,
): Promise<Entry | undefined> {
  const next = entryOf(entry.token, expiry, entry.acquiredAt, entry.owner, fence, detached, entry.keyField);
  try {
    await store.fs.rename(under(dir, entry.name), under(dir, next.name));
    return next;
  } catch (error) {
    if (isGone(error)) return undefined;
    throw store.unavailable(operation, error);
  }
}

/** Removes `entry` of `dir`, then `dir` if that left it empty; false when the entry was gone already. */
export async function removeEntry(store: FileStore, dir: string, entry: Entry, operation: string): Promise<boolean> {
  try {
    await store.fs.rmdir(under(dir, entry.name));
  } catch (error) {
    if (isGone(error)) return false;
    throw store.unavailable(operation, error);
  }
  await store.fs.rmdir(dir).catch(() => undefined);
  return true;
}
