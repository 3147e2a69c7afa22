/**
 * The lock files of a {@link FileLocker}, and every operation on them. Each operation is a few
 * atomic file-system calls; none needs a lock of its own.
 *
 * Layout of the lock directory, for a key whose SHA-256 (hex) is `H`:
 *
 * ```
 * H.lock/                    the lock: absent or empty = free; held = exactly one entry in it
 * H.lock/T.D.W.A.P.S.N.B.F.O.host  the holder's entry, an empty directory whose name says it
 *                            all (see `entry.ts`): its random token T, its deadline on the boot's
 *                            monotonic clock D and on the wall clock W, the grant time A, who
 *                            holds it: pid P, process start time S, pid namespace N, boot id B,
 *                            host; the grant's fencing token F and the holder's owner O
 * H.fence/<n>                the key's fencing counter: one empty file named by the last token
 * .tmp-T/                    an attempt being built (renamed to H.lock, or removed)
 * .owner-X                   an owner too long for an entry's name (see `owner.ts`)
 * ```
 *
 * Why this shape: the owner's token is in the entry's *name*, so every change of ownership is an
 * operation on a name, which the file system performs atomically and only if the name exists —
 * a compare-and-set without a lock:
 *
 * - **take**: build `.tmp-T/<entry>`, then `rename(.tmp-T, H.lock)`. A rename onto a non-empty
 *   directory fails, onto an absent or empty one succeeds, atomically: one winner, and the lock
 *   never exists without its entry.
 * - **extend**: `rename(H.lock/T.D…, H.lock/T.D2…)`: succeeds only while the entry exists, so only
 *   while nobody took the lock over; a holder whose extension succeeded held it throughout.
 * - **adopt** a handed-off lease: `rename(H.lock/T.D…, H.lock/T2.D2…)`, the same compare-and-set
 *   with a new token and owner: of two adopters (or an adopter and a takeover) one succeeds.
 * - **take over a stale lock** (`D` in the past, or its holder dead): `rmdir(H.lock/T.D…)`, then
 *   take as above. Of several contenders that found the same stale entry exactly one removal
 *   succeeds; an extension that came first renamed the entry, so every removal fails and the lock
 *   stays with its holder.
 * - **release**: `rmdir(H.lock/<our entry>)` (only ever our own), then `rmdir(H.lock)` (only if it
 *   is still empty) — the event that wakes waiters watching the directory.
 * - **fencing**: `rename(H.fence/n, H.fence/n+1)`: succeeds only for the caller that read `n`
 *   while it was current, so the counter only rises, even when a holder that lost its lock meanwhile
 *   writes late.
 *
 * An entry is a directory rather than a file holding the same fields because it costs one system
 * call to make (`mkdir`) instead of three (`open`, `write`, `close`), and a reader needs no second
 * call to learn who holds the lock.
 *
 * Every operation waits for one of a few slots ({@link OperationQueue}): extensions, releases and
 * fencing go before attempts, so a burst of attempts cannot starve the leases that are held.
 */
import { chmod, mkdir, readdir, rename, rmdir, stat, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { StoreUnavailableError } from "../errors.js";
import { type Entry, entryOf, parseEntry, remainingMs, takeable } from "./entry.js";
import { OperationQueue } from "./operation-queue.js";
import type { OwnerField } from "./owner.js";

export type { Entry } from "./entry.js";

/** The outcome of one attempt to take a lock. */
export type TakeResult =
  | { readonly taken: true; readonly entry: Entry; readonly startedAt: number }
  | { readonly taken: false; readonly holder: Entry | undefined };

/** What a `FileLocker`'s lock files saw (`FileLocker.stats`), for tests and the curious. */
export interface FileStoreStats {
  /** Stale entries this process removed (a dead or stopped holder's lock taken over). */
  staleTakeovers: number;
  /** Of those, entries whose holder was found dead before its deadline (taken over at once). */
  deadHolderTakeovers: number;
  /** Stale entries another contender removed first (this process lost the race for them). */
  lostTakeoverRaces: number;
}

/**
 * Error codes of a rename onto a lock directory that exists: not empty (POSIX), or any existing
 * directory (Windows, where an empty one is then removed and the rename tried again).
 */
const HELD_CODES = new Set(["ENOTEMPTY", "EEXIST", "EPERM"]);
/** Attempts of one take that found the lock changing under it before it counts as held. */
const TAKE_ROUNDS = 4;
/** Store operations of one locker in flight at most (libuv's thread pool has 4 threads by default). */
const OPERATIONS_IN_FLIGHT = 4;

/** The error code of a Node.js system error, if any. */
export function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Whether `error` says a path is gone (or a component of it is not a directory any more). */
export function isGone(error: unknown): boolean {
  const code = codeOf(error);
  return code === "ENOENT" || code === "ENOTDIR";
}

/** What {@link FileStore.adoptEntry} answers: the new entry, or why there is none. */
export type AdoptResult = { readonly entry: Entry; readonly startedAt: number } | "taken" | "expired";

/**
 * The lock files of one directory, as one locker writes them (its entries carry its `owner`).
 * Paths are built from a key's hash, never from the key.
 */
export class FileStore {
  readonly directory: string;
  /** The owner field of this locker's entries (see `owner.ts`). */
  readonly ownerField: OwnerField;
  readonly #queue = new OperationQueue(OPERATIONS_IN_FLIGHT);
  readonly stats: FileStoreStats = { staleTakeovers: 0, deadHolderTakeovers: 0, lostTakeoverRaces: 0 };
  /**
   * In a lock directory shared by several users (writable by its group or by others; set when it is
   * prepared): the mode of the directories other users write into — a lock (its stale entry is
   * removed by whoever takes it over), a key's readers, queue and fencing counter — the lock
   * directory's own permission bits (and setgid). `undefined` in a private directory.
   */
  shareMode: number | undefined;

  constructor(directory: string, owner: OwnerField) {
    this.directory = directory;
    this.ownerField = owner;
  }

  /**
   * `mkdir` of a directory other users of a shared lock directory write into: with
   * {@link shareMode} (set again after `mkdir`, as the umask takes bits off), else `privateMode`
   * (default: the umask's). Rejects as `mkdir` does (EEXIST included).
   */
  async makeDirectory(path: string, privateMode?: number): Promise<void> {
    if (this.shareMode === undefined) {
      await mkdir(path, privateMode === undefined ? undefined : { mode: privateMode });
      return;
    }
    await mkdir(path, { mode: this.shareMode });
    await chmod(path, this.shareMode);
  }

  /** The lock directory of a key hash. */
  lockPath(hash: string): string {
    return join(this.directory, `${hash}.lock`);
  }

  /**
   * One attempt to take the lock of `hash` for `token`, with a lease of `expiry` ms: takes it if
   * it is free, its holder's deadline passed or its holder is dead (exactly one of racing
   * contenders takes a stale lock over). `probe`: look before building anything (cheaper when the
   * lock is probably held).
   */
  take(hash: string, token: string, expiry: number, probe: boolean): Promise<TakeResult> {
    return this.#queue.run(false, () => this.#take(hash, token, expiry, probe));
  }

  /**
   * Runs `operation` (a few file-system calls, none of this store's queued methods) in one of the
   * store's slots: `urgent` ones (keeping held leases) go before attempts.
   */
  run<T>(urgent: boolean, operation: () => Promise<T>): Promise<T> {
    return this.#queue.run(urgent, operation);
  }

  async #take(hash: string, token: string, expiry: number, probe: boolean): Promise<TakeResult> {
    const lock = this.lockPath(hash);
    if (probe) {
      const holder = await this.readOwner(lock);
      if (holder !== undefined && !takeable(holder)) return { taken: false, holder };
    }
    const tmp = join(this.directory, `.tmp-${token}`);
    await this.call("create an attempt directory in", () => this.makeDirectory(tmp));
    let built: Entry | undefined;
    let installed = false;
    try {
      for (let round = 0; round < TAKE_ROUNDS; round++) {
        const startedAt = performance.now();
        const entry = entryOf(token, expiry, Date.now(), this.ownerField.field);
        if (built === undefined) {
          await this.call("write an attempt in", () => mkdir(join(tmp, entry.name)));
        } else if (built.name !== entry.name) {
          await this.call("refresh an attempt in", () => rename(join(tmp, built!.name), join(tmp, entry.name)));
        }
        built = entry;
        if (await this.#install(tmp, lock)) {
          installed = true;
          return { taken: true, entry, startedAt };
        }
        const holder = await this.readOwner(lock);
        if (holder === undefined) {
          // Freed meanwhile, or an empty directory left behind (a crash between the two removals of a release).
          await rmdir(lock).catch(() => undefined);
          continue;
        }
        if (!takeable(holder)) return { taken: false, holder };
        await this.removeStale(lock, holder);
      }
      return { taken: false, holder: await this.readOwner(lock) };
    } finally {
      // The attempt directory is still here unless the rename moved it onto the lock.
      if (!installed) {
        if (built !== undefined) await rmdir(join(tmp, built.name)).catch(() => undefined);
        await rmdir(tmp).catch(() => undefined);
      }
    }
  }

  /** Renames the attempt onto the lock; false when the lock is held (the directory is not empty). */
  async #install(tmp: string, lock: string): Promise<boolean> {
    try {
      await rename(tmp, lock);
      return true;
    } catch (error) {
      if (HELD_CODES.has(codeOf(error) ?? "")) return false;
      throw this.unavailable("take a lock in", error);
    }
  }

  /**
   * Removes a stale entry of `dir` (a lock, or the readers of a read-write key): exactly one of
   * the contenders that found it succeeds (true); false when it was gone (removed by another, or
   * renamed by an extension that came first).
   */
  async removeStale(dir: string, stale: Entry): Promise<boolean> {
    const dead = remainingMs(stale) > 0;
    try {
      await rmdir(join(dir, stale.name));
      this.stats.staleTakeovers += 1;
      if (dead) this.stats.deadHolderTakeovers += 1;
      return true;
    } catch (error) {
      if (codeOf(error) !== "ENOENT") throw this.unavailable("take over a stale lock in", error);
      this.stats.lostTakeoverRaces += 1;
      return false;
    }
  }

  /**
   * Moves our entry to a new deadline, `expiry` ms from now (recording `fence`, the grant's fencing
   * token, when given). Resolves to the new entry, or to `undefined` when the entry is gone (the
   * lock was taken over or deleted).
   */
  extend(hash: string, entry: Entry, expiry: number, fence?: bigint): Promise<Entry | undefined> {
    return this.#queue.run(true, () => this.moveEntry(this.lockPath(hash), entry, expiry, "extend a lock in", fence));
  }

  /**
   * Renames `entry` of `dir` (a lock, or the readers of a read-write key) to a new deadline,
   * `expiry` ms from now, for an operation in a slot: the new entry, or `undefined` when it is gone.
   * The new entry keeps the owner and the fencing token (unless `fence` replaces it); `detached`:
   * it names no process (a lease handed off: the process that writes it may exit).
   */
  async moveEntry(
    dir: string,
    entry: Entry,
    expiry: number,
    operation: string,
    fence = entry.fence,
    detached = false,
  ): Promise<Entry | undefined> {
    const next = entryOf(entry.token, expiry, entry.acquiredAt, entry.owner, fence, detached);
    try {
      await rename(join(dir, entry.name), join(dir, next.name));
      return next;
    } catch (error) {
      if (isGone(error)) return undefined;
      throw this.unavailable(operation, error);
    }
  }

  /**
   * Deletes our entry (and the lock directory, if still empty). Resolves to `"released"`, or, when
   * the entry was already gone, `"taken"` (another holder's entry is there) or `"expired"`.
   */
  release(hash: string, entry: Entry): Promise<"released" | "taken" | "expired"> {
    return this.#queue.run(true, () => this.#release(hash, entry));
  }

  async #release(hash: string, entry: Entry): Promise<"released" | "taken" | "expired"> {
    const lock = this.lockPath(hash);
    if (await this.removeEntry(lock, entry, "release a lock in")) return "released";
    const holder = await this.readOwner(lock);
    return holder !== undefined && holder.token !== entry.token ? "taken" : "expired";
  }

  /**
   * Removes `entry` of `dir`, then `dir` if that left it empty, for an operation in a slot; false
   * when the entry was gone already.
   */
  async removeEntry(dir: string, entry: Entry, operation: string): Promise<boolean> {
    try {
      await rmdir(join(dir, entry.name));
    } catch (error) {
      if (isGone(error)) return false;
      throw this.unavailable(operation, error);
    }
    await rmdir(dir).catch(() => undefined);
    return true;
  }

  /** The current entry of `hash`'s lock, if any (stale or not). */
  owner(hash: string): Promise<Entry | undefined> {
    return this.#queue.run(false, () => this.readOwner(this.lockPath(hash)));
  }

  /** The live-most entry of the lock directory `lock`, not queued (for operations in a slot). */
  async readOwner(lock: string): Promise<Entry | undefined> {
    let names: string[];
    try {
      names = await readdir(lock);
    } catch (error) {
      if (isGone(error)) return undefined;
      throw this.unavailable("read a lock in", error);
    }
    let found: Entry | undefined;
    for (const name of names) {
      const entry = parseEntry(name);
      if (entry !== undefined && (found === undefined || remainingMs(entry) > remainingMs(found))) found = entry;
    }
    return found;
  }

  /**
   * Every entry of `dir` (a lock, the readers or the queue of a read-write key, with `parse`
   * reading a name), stale or not, changing nothing; none when `dir` is absent.
   */
  entries(dir: string, parse: (name: string) => Entry | undefined = parseEntry): Promise<Entry[]> {
    return this.#queue.run(false, async () => {
      const names = await readdir(dir).catch((error: unknown) => {
        if (isGone(error)) return [] as string[];
        throw this.unavailable("read a lock in", error);
      });
      return names.flatMap((name) => parse(name) ?? []);
    });
  }

  /**
   * Takes over the entry with `token` in `dir` (a lock, or the readers of a read-write key) for
   * this store's owner: renames it to an entry with `newToken`, a deadline `expiry` ms from now and
   * the same fencing token — one rename, so of two adopters of one entry exactly one succeeds (as
   * of two extensions, or an extension and a takeover). `"taken"` when another live entry holds
   * `dir` instead, `"expired"` when the entry is gone or its deadline passed. (A holder known dead
   * does not matter: a handed-off lease outlives the process that handed it off.)
   */
  adoptEntry(dir: string, token: string, newToken: string, expiry: number): Promise<AdoptResult> {
    return this.#queue.run(true, async () => {
      const names = await readdir(dir).catch((error: unknown) => {
        if (isGone(error)) return [] as string[];
        throw this.unavailable("read a lock in", error);
      });
      const entries = names.flatMap((name) => parseEntry(name) ?? []);
      const found = entries.find((entry) => entry.token === token);
      if (found !== undefined && remainingMs(found) > 0) {
        const startedAt = performance.now();
        const next = entryOf(newToken, expiry, found.acquiredAt, this.ownerField.field, found.fence);
        try {
          await rename(join(dir, found.name), join(dir, next.name));
          return { entry: next, startedAt };
        } catch (error) {
          if (!isGone(error)) throw this.unavailable("adopt a lock in", error);
        }
      }
      const others = await this.readOwner(dir);
      return others !== undefined && others.token !== token && !takeable(others) ? "taken" : "expired";
    });
  }

  /**
   * The next fencing token of `hash` (call only while holding its lock): 1 for the first grant,
   * then one more than the last. The counter is the name of the one file in `H.fence/`, moved up
   * by a rename that only succeeds from the current value.
   */
  nextFencingToken(hash: string): Promise<bigint> {
    return this.#queue.run(true, () => this.#nextFencingToken(hash));
  }

  async #nextFencingToken(hash: string): Promise<bigint> {
    const dir = join(this.directory, `${hash}.fence`);
    for (let round = 0; round < 64; round++) {
      const values = await this.#fenceValues(dir);
      const last = values.reduce((max, value) => (value > max ? value : max), 0n);
      for (const value of values) {
        if (value < last) await unlink(join(dir, String(value))).catch(() => undefined);
      }
      try {
        if (values.length === 0) await writeFile(join(dir, "1"), "", { flag: "wx" });
        else await rename(join(dir, String(last)), join(dir, String(last + 1n)));
        return last + 1n;
      } catch (error) {
        if (codeOf(error) !== "ENOENT" && codeOf(error) !== "EEXIST") {
          throw this.unavailable("issue a fencing token in", error);
        }
      }
    }
    throw this.unavailable("issue a fencing token in", new Error("the counter kept changing"));
  }

  async #fenceValues(dir: string): Promise<bigint[]> {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (error) {
      if (codeOf(error) !== "ENOENT") throw this.unavailable("read a fencing counter in", error);
      await this.call("create a fencing counter in", () => this.makeDirectory(dir, 0o700).catch(ignoreExists));
      return [];
    }
    return names.filter((name) => /^\d{1,30}$/.test(name)).map((name) => BigInt(name));
  }

  /**
   * Removes attempt directories older than `olderThanMs` (left by a process killed while it made
   * an attempt); best effort.
   */
  sweepAttempts(olderThanMs: number): Promise<void> {
    return this.#queue.run(false, () => this.#sweepAttempts(olderThanMs));
  }

  async #sweepAttempts(olderThanMs: number): Promise<void> {
    const names = await readdir(this.directory).catch(() => [] as string[]);
    const cutoff = Date.now() - olderThanMs;
    for (const name of names) {
      if (!name.startsWith(".tmp-")) continue;
      const path = join(this.directory, name);
      try {
        const info = await stat(path);
        if (info.mtimeMs > cutoff) continue;
        // An owner file being written (see `owner.ts`), or an attempt directory.
        if (!info.isDirectory()) {
          await unlink(path);
          continue;
        }
        for (const inner of await readdir(path)) await rmdir(join(path, inner));
        await rmdir(path);
      } catch {
        // Gone meanwhile, or not ours to remove.
      }
    }
  }

  /** Runs `operation`; a failure is a StoreUnavailableError saying what could not be done. */
  async call<T>(what: string, operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      throw this.unavailable(what, error);
    }
  }

  unavailable(what: string, cause: unknown): StoreUnavailableError {
    const code = codeOf(cause) ?? (cause instanceof Error ? cause.message : String(cause));
    return new StoreUnavailableError(
      this.directory,
      `The file lock store could not ${what} ${this.directory} (${code})`,
      { cause },
    );
  }
}

function ignoreExists(error: unknown): void {
  if (codeOf(error) !== "EEXIST") throw error;
}
