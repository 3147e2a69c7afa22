/**
 * The empty directories a {@link FileStore} keeps for its next takes (see `store.ts`): spare
 * attempt directories, and lock directories its releases left empty.
 *
 * A released entry is an empty directory: kept as a spare, the next take makes its entry in it
 * and renames it onto the lock, so a take + release in steady state is three calls. A store keeps
 * a few spares. With its calls on the event loop (a file system in memory) it leaves at most
 * {@link EMPTY_LOCKS_KEPT} locks empty (past that, and when it closes, it removes them; a lock
 * directory may be removed whenever it is empty). Through the thread pool, a release then removes
 * the lock it emptied (`rmdir`, sent once the release is done and not waited for): a rename onto an
 * absent lock is far cheaper than one onto an empty lock, which the file system must delete on the
 * way. Without room for another spare, after `close()`, and in a directory shared by several users
 * (a spare has this user's mode), nothing is kept.
 */
import { rmdir } from "node:fs/promises";
import type { CallPolicy } from "./call-policy.js";
import { THREAD_POOL_CALLS } from "./calls.js";
import type { OperationQueue } from "./operation-queue.js";

/** Lock directories a store leaves empty at most before it removes the oldest of them. */
const EMPTY_LOCKS_KEPT = 64;

/** What {@link SpareDirectories} needs of its store. */
export interface SpareSettings {
  /** The store's operation slots (a removal of an empty lock waits for one, behind held leases). */
  readonly queue: OperationQueue;
  /** Where the store's calls run (see `CallPolicy`). */
  readonly calls: CallPolicy;
  /** Spares kept at most (one per operation in flight). */
  readonly most: number;
}

/** A store's spare attempt directories and the lock directories it left empty (see the module comment). */
export class SpareDirectories {
  readonly #queue: OperationQueue;
  readonly #calls: CallPolicy;
  readonly #most: number;
  /** Empty directories of the store, named `.tmp-T` or `H.tmp-T`, for the next attempts. */
  readonly #spares: string[] = [];
  /** Lock directories the store's releases left empty, the oldest first (see {@link emptied}). */
  readonly #emptyLocks = new Set<string>();
  /** Removals sent without waiting for them: {@link close} waits for them. */
  readonly #tidying = new Set<Promise<void>>();
  /** Closed: nothing more is kept. */
  #closed = false;

  constructor(settings: SpareSettings) {
    this.#queue = settings.queue;
    this.#calls = settings.calls;
    this.#most = settings.most;
  }

  /** Whether another spare may be kept: not closed, not `shared` (see the module comment), and room left. */
  roomFor(shared: boolean): boolean {
    return !this.#closed && !shared && this.#spares.length < this.#most;
  }

  /** A spare for the next attempt, if one is kept (handed to one attempt at a time). */
  take(): string | undefined {
    return this.#spares.pop();
  }

  /** Keeps the empty directory `path` for the next attempt, or removes it when there is no room. */
  keep(path: string, shared: boolean): void {
    if (!this.roomFor(shared)) {
      this.tidy(this.#calls.calls(this.#queue.queued !== 0).rmdir(path));
      return;
    }
    this.#spares.push(path);
  }

  /**
   * A release left the lock directory `lock` empty. Through the thread pool it is removed now, off
   * the release's path, so that the next take renames onto an absent lock. On the event loop, or
   * while operations wait for a slot, it is left empty for the next take; past
   * {@link EMPTY_LOCKS_KEPT} of them, the one left longest ago is removed (only if still empty: a
   * lock taken meanwhile stays), so that a process using many keys leaves few empty directories.
   */
  emptied(lock: string): void {
    if (!this.#calls.synchronous && this.#queue.queued === 0) {
      this.#removeIfEmpty(lock);
      return;
    }
    this.#emptyLocks.delete(lock);
    this.#emptyLocks.add(lock);
    if (this.#emptyLocks.size <= EMPTY_LOCKS_KEPT) return;
    const oldest = this.#emptyLocks.values().next().value as string;
    this.#emptyLocks.delete(oldest);
    this.#removeIfEmpty(oldest);
  }

  /**
   * Removes the lock directory `lock` if it is still empty (an `rmdir` through the thread pool, in
   * a slot behind held leases' operations), without waiting: a lock taken meanwhile stays.
   */
  #removeIfEmpty(lock: string): void {
    this.tidy(this.#queue.run(false, () => THREAD_POOL_CALLS.rmdir(lock)));
  }

  /** Tracks a removal nobody waits for (best effort: a failure is ignored), for {@link close}. */
  tidy(removal: Promise<unknown>): void {
    const tracked: Promise<void> = removal
      .catch(() => undefined)
      .then(() => {
        this.#tidying.delete(tracked);
      });
    this.#tidying.add(tracked);
  }

  /**
   * Removes the spares and the empty lock directories kept (a lock taken meanwhile by another
   * stays), and keeps nothing more; resolves once every removal sent is done. Best effort.
   */
  close(): Promise<void> {
    this.#closed = true;
    const left = [...this.#spares.splice(0), ...this.#emptyLocks];
    this.#emptyLocks.clear();
    const removing = this.#queue.run(true, async () => {
      for (const path of left) await rmdir(path).catch(() => undefined);
    });
    // A process that exits once `close()` resolved leaves nothing behind.
    return Promise.all([removing, ...this.#tidying]).then(() => undefined);
  }
}
