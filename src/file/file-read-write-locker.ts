import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkFiles } from "../deployment/files.js";
// Referenced from doc comments only.
import type { UnsupportedError } from "../errors.js";
import type { Locker } from "../locker.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS, type ReadWriteStore } from "../lockers/read-write-views.js";
import { LockDirectory } from "./directory.js";
import { fileBackend } from "./file-backend.js";
// Referenced from doc comments only.
import type { FileLocker } from "./file-locker.js";
import { type FileLockerOptions, type ResolvedFileLockerOptions, resolveFileOptions } from "./options.js";
import type { FileStoreStats } from "./store.js";

/** The file store's read-write views. */
const FILE: ReadWriteStore = { name: "file", permits: READ_WRITE_PERMITS };

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
export class FileReadWriteLocker extends CoreReadWriteLocker<ResolvedFileLockerOptions> {
  readonly #directory: LockDirectory;

  /** @param options see {@link FileLockerOptions}. */
  constructor(options?: FileLockerOptions) {
    const resolved = resolveFileOptions(options);
    const directory = new LockDirectory(resolved);
    super(resolved, fileBackend(directory, resolved, READ_WRITE_PERMITS), FILE);
    attachDeploymentCheck([this, this.read, this.write], () => checkFiles(resolved.directory));
    this.#directory = directory;
  }

  /** The lock directory (absolute). */
  get directory(): string {
    return this.settings.directory;
  }

  /** Stale entries this locker took over, and races for one it lost (see `FileLocker.stats`). */
  get stats(): Readonly<FileStoreStats> {
    return { ...this.#directory.store.stats };
  }
}
