import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkFiles } from "../deployment/files.js";
// Referenced from doc comments only.
import type { Locker } from "../locker.js";
import { CoreSemaphore } from "../lockers/core-semaphore.js";
import { splitSemaphoreOptions } from "../lockers/semaphore-options.js";
import { LockDirectory } from "./directory.js";
// Referenced from doc comments only.
import type { FileLocker } from "./file-locker.js";
import { type FileLockerOptions, type ResolvedFileLockerOptions, resolveFileOptions } from "./options.js";
import { fileSemaphoreBackend } from "./semaphore-backend.js";
import type { FileStoreStats } from "./store.js";

/** Options of {@link FileSemaphore}: a {@link FileLocker}'s options plus the number of permits per key. */
export interface FileSemaphoreOptions extends FileLockerOptions {
  /**
   * Permits per key (required): a positive safe integer. Every semaphore using a key must pass
   * the same limit (the files do not record it).
   */
  limit: number;
}

/**
 * A counting semaphore across the processes of one host, with no server: at most `limit` permits
 * of a key are held at once, by every process using the same lock directory. It is a
 * {@link Locker}: `lock` takes one permit, `acquire(…, { weight })` several (1..limit), and every
 * lease is extended, reported lost and released like a lock's, with {@link FileLocker}'s options
 * and guarantees (atomic, crash-safe entries; deadlines on the boot's monotonic clock).
 *
 * - Each holder is one entry in the key's holders' directory (in a directory per weight). An
 *   attempt adds its entry only when its weight fits, then counts again, its own entry included,
 *   and steps back when the total is over the limit: two attempts racing never both exceed it,
 *   without any lock (the argument: `semaphore-files.ts`).
 * - A holder whose process died (or whose deadline passed: a stopped process) loses its permits
 *   to the next attempt that counts them, as a lock is taken over; so a crashed holder's permits
 *   come back at once on this host, or after `expiry` at the latest.
 * - Waiters take tickets in one queue per key, in the directory, and are served strictly in
 *   arrival order across processes: only the first in line tries, so a heavy waiter is never
 *   overtaken by lighter ones behind it. Releases and departures from the queue are events in the
 *   lock directory, heard through `fs.watch`; a jittered backoff is the safety net.
 * - `fencing: true` is an UnsupportedError unless `limit` is 1 (then tokens rise per key, as a
 *   {@link FileLocker}'s). Leases can be handed off and adopted within the lock directory.
 * - A semaphore's files never meet a `FileLocker`'s or a read-write key's of the same key name
 *   (their names are hashed apart).
 */
export class FileSemaphore extends CoreSemaphore<ResolvedFileLockerOptions> {
  readonly #directory: LockDirectory;

  /** @param options see {@link FileLockerOptions}, plus `limit`. */
  constructor(options: FileSemaphoreOptions) {
    const { limit, rest } = splitSemaphoreOptions(options);
    const resolved = resolveFileOptions(rest);
    const directory = new LockDirectory(resolved);
    super(resolved, fileSemaphoreBackend(directory, resolved, limit), limit, "file-semaphore");
    attachDeploymentCheck([this], () => checkFiles(resolved.directory));
    this.#directory = directory;
  }

  /** The lock directory (absolute). */
  get directory(): string {
    return this.options.directory;
  }

  /** Stale entries this semaphore took over, and races for one it lost (see `FileLocker.stats`). */
  get stats(): Readonly<FileStoreStats> {
    return { ...this.#directory.store.stats };
  }

  /** @internal */
  protected fencingRefusal(): string {
    return `Fencing tokens need an exclusive grant; a semaphore with limit ${this.limit} shares its permits`;
  }
}
