import { CoreLocker } from "../core/core-locker.js";
import { LockCore } from "../core/lock-core.js";
import { UnsupportedError } from "../errors.js";
import { checkWeight, DEFAULT_ACQUIRE_OPTIONS, type ResolvedAcquireOptions } from "../internal/validate.js";
import type { Locker } from "../locker.js";
import type { ReadWriteLocker } from "../read-write.js";
import { LockDirectory } from "./directory.js";
import { fileBackend } from "./file-backend.js";
import { type FileLockerOptions, type ResolvedFileLockerOptions, resolveFileOptions } from "./options.js";
import type { FileStoreStats } from "./store.js";

/** Permits of a read-write key: a reader takes one, a writer all of them. */
const PERMITS = 1_000_000_000;

/** One view of a {@link FileReadWriteLocker}: the readers' or the writers' {@link Locker}. */
class FileReadWriteView extends CoreLocker<ResolvedFileLockerOptions> {
  protected readonly defaultRequest: ResolvedAcquireOptions;
  readonly #writer: boolean;

  constructor(engine: LockCore<ResolvedFileLockerOptions>, writer: boolean) {
    super(engine, writer ? "file-write" : "file-read");
    this.#writer = writer;
    this.defaultRequest = writer ? { ...DEFAULT_ACQUIRE_OPTIONS, weight: PERMITS } : DEFAULT_ACQUIRE_OPTIONS;
  }

  protected request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    checkWeight(options.weight, 1, "a read or write lease takes one lock");
    if (options.fencing && !this.#writer) {
      throw new UnsupportedError("Fencing tokens need an exclusive grant: use them on write leases, not read leases");
    }
    return this.#writer ? { ...options, weight: PERMITS } : options;
  }
}

/**
 * Read-write locks across the processes of one host, with no server (like `flock`'s shared and
 * exclusive locks): per key, many readers or one writer. `read` and `write` are {@link Locker}s of
 * one lock directory, with {@link FileLocker}'s options and guarantees (atomic, crash-safe entries;
 * dead and stopped holders taken over; deadlines on the boot's monotonic clock).
 *
 * - A writer holds the key's lock as a `FileLocker` would; each reader holds an entry of its own
 *   beside it. Both write first and look second, so a reader and a writer never hold together
 *   (the layout and the argument: `permits.ts`).
 * - Waiters of both kinds take tickets in one queue per key, in the directory, served in arrival
 *   order across processes: a waiting writer blocks readers that arrive after it, and readers
 *   queued before the next writer get in together when a writer releases.
 * - Write leases can carry fencing tokens (`fencing` on a read lease is an {@link UnsupportedError}).
 * - Closing either view closes both. A read-write key's files never meet a `FileLocker`'s of the
 *   same key name (their names are hashed apart).
 */
export class FileReadWriteLocker implements ReadWriteLocker {
  /** Shared (read) leases: many at once, none while a writer holds the key. */
  readonly read: Locker;
  /** Exclusive (write) leases. */
  readonly write: Locker;
  readonly #engine: LockCore<ResolvedFileLockerOptions>;
  readonly #directory: LockDirectory;

  /** @param options see {@link FileLockerOptions}. */
  constructor(options?: FileLockerOptions) {
    const resolved = resolveFileOptions(options);
    this.#directory = new LockDirectory(resolved);
    this.#engine = new LockCore(resolved, fileBackend(this.#directory, resolved, PERMITS), PERMITS);
    this.read = new FileReadWriteView(this.#engine, false);
    this.write = new FileReadWriteView(this.#engine, true);
  }

  /** The lock directory (absolute). */
  get directory(): string {
    return this.#engine.options.directory;
  }

  /** Stale entries this locker took over, and races for one it lost (see `FileLocker.stats`). */
  get stats(): Readonly<FileStoreStats> {
    return { ...this.#directory.store.stats };
  }

  /** Number of leases held now, read and write. */
  get heldCount(): number {
    return this.#engine.heldCount;
  }

  /** Number of callers (readers and writers) waiting in `lock` or `acquire`. */
  get waitingCount(): number {
    return this.#engine.waitingCount;
  }

  /** Closes both views: see `Locker.close`. Idempotent. */
  close(): Promise<void> {
    return this.#engine.close();
  }
}
