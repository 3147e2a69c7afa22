/**
 * The store of a `globallock` invocation: a {@link FileReadWriteLocker} (the default) or a
 * {@link RedisReadWriteLocker} (a {@link RedisLocker} on a quorum) over clients the CLI creates
 * from `--redis` URLs. `status` and the waiting line ask its locker's `inspect` who holds a key.
 * Each store's modules are imported only when it is chosen, so a `run` on the file store loads
 * nothing of Redis (see bench/cli-startup.mjs).
 */
// Referenced from doc comments only.
import type { FileSemaphore } from "../file/file-semaphore.js";
import type { Locker } from "../locker.js";
// Referenced from doc comments only.
import type { RedisSemaphore } from "../redis/redis-semaphore.js";
import type { StoreChoice } from "./invocation.js";

/** An open store. */
export interface OpenStore {
  readonly locker: Locker;
  /** For messages: `file store <dir>` or `Redis <host:port>[, …]`. */
  readonly label: string;
  /** Closes the locker and the store's connections. */
  close(): Promise<void>;
}

/** The locker options the command line sets: the default lease (`--expiry`) and `--owner`. */
export interface CliLockerOptions {
  readonly expiry?: number | undefined;
  readonly owner?: string | undefined;
}

/**
 * Opens the store chosen on the command line, with the locker options given there. Its locker is
 * a read-write locker's view (`read` when `shared`, else `write`: exclusive and shared runs of a
 * key exclude each other), except on a Redlock quorum (a {@link RedisLocker}: exclusive only; the
 * command line refuses `--shared` there). With `limit` (`--limit N`), it is the store's semaphore
 * of that limit instead (a {@link FileSemaphore}, a {@link RedisSemaphore}), whose modules only
 * such a run loads.
 */
export async function openStore(
  choice: StoreChoice,
  options: CliLockerOptions,
  shared: boolean,
  limit?: number,
): Promise<OpenStore> {
  if (choice.kind === "file") {
    return limit === undefined
      ? (await import("./file-store.js")).openFileStore(choice.directory, options, shared)
      : (await import("./file-semaphore-store.js")).openFileSemaphore(choice.directory, options, limit);
  }
  return (await import("./redis-store.js")).openRedisStore(choice.urls, options, shared, limit);
}
