// Referenced from doc comments only.
import type { LockerClosedError, UnsupportedError } from "./errors.js";
import type { Locker } from "./locker.js";

/**
 * A read-write lock service: per key, many readers at once or one writer. Both views are
 * {@link Locker}s of one store, so `lockAndDo`, `lockAll`, `await using` and leases work on each.
 *
 * - **Arrival order, shared by readers and writers.** Each key has one queue. A waiting writer
 *   blocks readers that arrive after it, so a stream of overlapping readers cannot starve it; when
 *   a writer releases, every reader queued before the next writer is admitted together.
 *   `tryLock` on either view fails while anyone is queued for the key.
 * - **Fencing** is for exclusive grants: `{ fencing: true }` on the `write` view issues a token
 *   that rises with every write grant of the key; on the `read` view it is an {@link UnsupportedError}.
 * - **`weight`** on either view must be 1 (a reader counts as one reader, a writer as all of them).
 * - **Closing** either view, or the read-write locker, closes both: calls on either then reject
 *   with {@link LockerClosedError}, and waiters of both are rejected.
 */
export interface ReadWriteLocker {
  /** Shared access: holds alongside other readers, excludes writers. */
  readonly read: Locker;
  /** Exclusive access: excludes readers and other writers. */
  readonly write: Locker;
  /** Closes both views (see {@link Locker.close}); idempotent. */
  close(): Promise<void>;
}
