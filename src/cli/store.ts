/**
 * The store of a `globallock` invocation: a {@link FileReadWriteLocker} (the default) or a
 * {@link RedisReadWriteLocker} (a {@link RedisLocker} on a quorum) over clients the CLI creates
 * from `--redis` URLs, with what `status` and the
 * waiting line need to know about a key's holder. Each store's modules are imported only when it
 * is chosen, so a `run` on the file store loads nothing of Redis (see bench/cli-startup.mjs).
 */
import type { Locker } from "../locker.js";
import type { StoreChoice } from "./args.js";

/** What is known about who holds a key. */
export interface HolderInfo {
  readonly held: boolean;
  /** File store: the holder's process id and host. */
  readonly pid?: number | undefined;
  readonly host?: string | undefined;
  /** File store: when it was granted (wall-clock ms). */
  readonly acquiredAt?: number | undefined;
  /** Ms until the lease runs out unless extended (Redis: the key's TTL on the holding servers). */
  readonly ttlMs?: number | undefined;
  /** Redis: servers holding the key, of how many. */
  readonly servers?: { readonly holding: number; readonly of: number } | undefined;
}

/** An open store. */
export interface OpenStore {
  readonly locker: Locker;
  /** For messages: `file store <dir>` or `Redis <host:port>[, …]`. */
  readonly label: string;
  /** Who holds `key` now. */
  holder(key: string): Promise<HolderInfo>;
  /** Closes the locker and the store's connections. */
  close(): Promise<void>;
}

/**
 * Opens the store chosen on the command line, with `expiry` as the default lease (if given). Its
 * locker is a read-write locker's view (`read` when `shared`, else `write`: exclusive and shared
 * runs of a key exclude each other), except on a Redlock quorum (a {@link RedisLocker}: exclusive
 * only; the command line refuses `--shared` there).
 */
export async function openStore(choice: StoreChoice, expiry: number | undefined, shared: boolean): Promise<OpenStore> {
  if (choice.kind === "file") return (await import("./file-store.js")).openFileStore(choice.directory, expiry, shared);
  return (await import("./redis-store.js")).openRedisStore(choice.urls, expiry, shared);
}
