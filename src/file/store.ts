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
 * .tmp-T/, H.tmp-T/          an attempt directory: being built (renamed to a lock, or emptied),
 *                            or a spare one a store keeps empty for its next attempt
 * .owner-X                   an owner too long for an entry's name (see `owner.ts`)
 * ```
 *
 * Why this shape: the owner's token is in the entry's *name*, so every change of ownership is an
 * operation on a name, which the file system performs atomically and only if the name exists —
 * a compare-and-set without a lock:
 *
 * - **take**: make `<entry>` in an empty attempt directory, then `rename(attempt, H.lock)`. A
 *   rename onto a non-empty directory fails, onto an absent or empty one succeeds (replacing it),
 *   atomically: one winner, and the lock never holds an entry it was not moved in with.
 * - **extend**: `rename(H.lock/T.D…, H.lock/T.D2…)`: succeeds only while the entry exists, so only
 *   while nobody took the lock over; a holder whose extension succeeded held it throughout.
 * - **adopt** a handed-off lease: `rename(H.lock/T.D…, H.lock/T2.D2…)`, the same compare-and-set
 *   with a new token and owner: of two adopters (or an adopter and a takeover) one succeeds.
 * - **take over a stale lock** (`D` in the past, or its holder dead): `rmdir(H.lock/T.D…)`, then
 *   take as above. Of several contenders that found the same stale entry exactly one removal
 *   succeeds; an extension that came first renamed the entry, so every removal fails and the lock
 *   stays with its holder.
 * - **release**: `rename(H.lock/<our entry>, H.tmp-T)`: moves our entry (only ever our own: the
 *   rename fails once it is gone) out of the lock, which is left empty, that is free. The entry,
 *   an empty directory, is the store's next attempt directory, so a take + release in steady state
 *   is three calls: `mkdir(H.tmp-T/<entry>)`, `rename(H.tmp-T, H.lock)`, `rename(H.lock/<entry>,
 *   H.tmp-T2)`. The new name starts with the key's hash: the event that wakes waiters watching the
 *   directory. Which spares and empty locks a store keeps, and when it removes them: `spares.ts`.
 *   Without room for another spare, after `close()`, and in a directory shared by several users, a
 *   release removes the entry and then the lock directory (`rmdir`, which fails unless it is still
 *   empty).
 * - **fencing**: `rename(H.fence/n, H.fence/n+1)` (see `fence-counter.ts`).
 *
 * Why two takers never both hold, with empty lock directories around: a lock is held exactly when
 * its directory holds an entry, and an entry gets into `H.lock` only inside the directory a take
 * renames onto it, which the file system refuses while `H.lock` holds anything (`ENOTEMPTY`; the
 * check and the replacement are one atomic step, under the directory's lock). Nothing ever makes a
 * name inside an existing `H.lock`: extensions and adoptions rename the one entry in place, a
 * release or a takeover moves or removes it, a removal of `H.lock` itself succeeds only while it is
 * empty. An attempt directory holds exactly the one entry its store made in it: a spare is a
 * released entry (an empty directory nobody writes into) or an attempt emptied after a miss, and
 * the store hands it to one attempt at a time. The one other writer, the sweep of attempt
 * directories older than a minute (left by a killed process, or a spare kept that long), first
 * renames one aside and only then empties it: a take racing it either moved the directory onto the
 * lock first (the sweep then finds nothing) or finds it gone and builds another — never moves a
 * half-emptied one. So an empty `H.lock` is exactly as free as a missing one.
 *
 * An entry is a directory rather than a file holding the same fields because it costs one system
 * call to make (`mkdir`) instead of three (`open`, `write`, `close`), and a reader needs no second
 * call to learn who holds the lock.
 *
 * Every operation waits for one of a few slots ({@link OperationQueue}): extensions, releases and
 * fencing go before attempts, so a burst of attempts cannot starve the leases that are held. The
 * calls of takes, releases and extensions go through libuv's thread pool, or, with
 * `FileLockerOptions.syncCalls`, run on the event loop while no operation waits (`calls.ts`).
 */
import { chmod, mkdir, readdir } from "node:fs/promises";
import { sep } from "node:path";
import { StoreUnavailableError } from "../errors.js";
import { type AdoptResult, adoptEntry } from "./adoption.js";
import { sweepAttempts } from "./attempt-sweep.js";
import type { CallPolicy } from "./call-policy.js";
import type { FileCalls } from "./calls.js";
import { type Entry, entryOf, parseEntry, remainingMs, takeable } from "./entry.js";
import { moveEntry, removeEntry, removeStale, under } from "./entry-moves.js";
import { drawFencingToken } from "./fence-counter.js";
import { codeOf, isGone } from "./fs-errors.js";
import { OperationQueue } from "./operation-queue.js";
import type { OwnerField } from "./owner.js";
import { SpareDirectories } from "./spares.js";

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
  /** Spare attempt directories, and the lock directories this store left empty (see `spares.ts`). */
  readonly #spares: SpareDirectories;
  /** Where takes, releases and extensions make their calls (see {@link fs}). */
  readonly calls: CallPolicy;
  /**
   * In a lock directory shared by several users (writable by its group or by others; set when it is
   * prepared): the mode of the directories other users write into — a lock (its stale entry is
   * removed by whoever takes it over), a key's readers, queue and fencing counter — the lock
   * directory's own permission bits (and setgid). `undefined` in a private directory.
   */
  shareMode: number | undefined;

  /**
   * @param calls where takes, releases and extensions make their calls (`FileLockerOptions.syncCalls`;
   * see {@link fs}).
   */
  constructor(directory: string, owner: OwnerField, calls: CallPolicy) {
    this.directory = directory;
    this.ownerField = owner;
    this.calls = calls;
    this.#spares = new SpareDirectories({ queue: this.#queue, calls, most: OPERATIONS_IN_FLIGHT });
  }

  /**
   * The calls of takes, releases and extensions (`calls.ts`): synchronous when the policy says so
   * and no operation of this store waits for a slot, else through the thread pool (see
   * {@link CallPolicy.calls}).
   */
  get fs(): FileCalls {
    return this.calls.calls(this.#queue.queued !== 0);
  }

  /**
   * `mkdir` of a directory other users of a shared lock directory write into: with
   * {@link shareMode} (set again after `mkdir`, as the umask takes bits off), else `privateMode`
   * (default: the umask's). Rejects as `mkdir` does (EEXIST included).
   */
  async makeDirectory(path: string, privateMode?: number): Promise<void> {
    if (this.shareMode === undefined) {
      await (privateMode === undefined ? this.fs.mkdir(path) : mkdir(path, { mode: privateMode }));
      return;
    }
    await mkdir(path, { mode: this.shareMode });
    await chmod(path, this.shareMode);
  }

  /** The path of `name` (one path component) in the lock directory. */
  #inDirectory(name: string): string {
    return this.directory.endsWith(sep) ? `${this.directory}${name}` : under(this.directory, name);
  }

  /** The lock directory of a key hash. */
  lockPath(hash: string): string {
    return this.#inDirectory(`${hash}.lock`);
  }

  /**
   * One attempt to take the lock of `hash` for `token`, with a lease of `expiry` ms: takes it if
   * it is free, its holder's deadline passed or its holder is dead (exactly one of racing
   * contenders takes a stale lock over). `probe`: look before building anything (cheaper when the
   * lock is probably held). The entry records the key field `keyField` (see `key-field.ts`).
   */
  take(hash: string, token: string, expiry: number, probe: boolean, keyField = ""): Promise<TakeResult> {
    return this.#queue.run(false, () => this.#take(hash, token, expiry, probe, keyField));
  }

  /**
   * Runs `operation` (a few file-system calls, none of this store's queued methods) in one of the
   * store's slots: `urgent` ones (keeping held leases) go before attempts.
   */
  run<T>(urgent: boolean, operation: () => Promise<T>): Promise<T> {
    return this.#queue.run(urgent, operation);
  }

  async #take(hash: string, token: string, expiry: number, probe: boolean, keyField: string): Promise<TakeResult> {
    const lock = this.lockPath(hash);
    if (probe) {
      const holder = await this.readOwner(lock);
      if (holder !== undefined && !takeable(holder)) return { taken: false, holder };
    }
    // The attempt directory (a spare, or a new `.tmp-T`) holding `built`, our entry.
    let attempt: string | undefined;
    let built: Entry | undefined;
    try {
      for (let round = 0; round < TAKE_ROUNDS; round++) {
        const startedAt = performance.now();
        const entry = entryOf(token, expiry, Date.now(), this.ownerField.field, undefined, false, keyField);
        if (attempt === undefined || built === undefined) {
          attempt = await this.#build(token, entry);
        } else if (built.name !== entry.name) {
          const from = under(attempt, built.name);
          await this.call("refresh an attempt in", () => this.fs.rename(from, under(attempt as string, entry.name)));
        }
        built = entry;
        const installed = await this.#install(attempt, lock);
        if (installed === "taken") {
          attempt = undefined;
          return { taken: true, entry, startedAt };
        }
        if (installed === "gone") {
          // A sweep took our attempt directory away (a spare it found old): build a new one.
          attempt = undefined;
          continue;
        }
        const holder = await this.readOwner(lock);
        if (holder === undefined) {
          // Freed meanwhile (or, on Windows, an empty lock directory, which a rename never replaces there).
          await this.fs.rmdir(lock).catch(() => undefined);
          continue;
        }
        if (!takeable(holder)) return { taken: false, holder };
        await removeStale(this, lock, holder);
      }
      return { taken: false, holder: await this.readOwner(lock) };
    } finally {
      // The attempt directory is still here unless the rename moved it onto the lock: empty, it is kept.
      if (attempt !== undefined && built !== undefined) {
        const spare = attempt;
        const emptied = await this.fs.rmdir(under(spare, built.name)).then(
          () => true,
          () => false,
        );
        if (emptied) this.#spares.keep(spare, this.shareMode !== undefined);
      }
    }
  }

  /**
   * An attempt directory with `entry` in it (no other): a spare with the entry made in it, or
   * (none kept, or the kept one swept away meanwhile) a new `.tmp-<token>` directory.
   */
  async #build(token: string, entry: Entry): Promise<string> {
    const spare = this.#spares.take();
    if (spare !== undefined) {
      try {
        await this.fs.mkdir(under(spare, entry.name));
        return spare;
      } catch (error) {
        if (!isGone(error)) throw this.unavailable("write an attempt in", error);
      }
    }
    const attempt = this.#inDirectory(`.tmp-${token}`);
    await this.call("create an attempt directory in", () => this.makeDirectory(attempt));
    try {
      await this.fs.mkdir(under(attempt, entry.name));
    } catch (error) {
      await this.fs.rmdir(attempt).catch(() => undefined);
      throw this.unavailable("write an attempt in", error);
    }
    return attempt;
  }

  /**
   * Renames the attempt onto the lock: `"taken"`; `"held"` when the lock is held (the directory is
   * not empty); `"gone"` when the attempt directory is gone.
   */
  async #install(attempt: string, lock: string): Promise<"taken" | "held" | "gone"> {
    try {
      await this.fs.rename(attempt, lock);
      return "taken";
    } catch (error) {
      const code = codeOf(error) ?? "";
      if (HELD_CODES.has(code)) return "held";
      if (code === "ENOENT") return "gone";
      throw this.unavailable("take a lock in", error);
    }
  }

  /**
   * Moves our entry to a new deadline, `expiry` ms from now (recording `fence`, the grant's fencing
   * token, when given). Resolves to the new entry, or to `undefined` when the entry is gone (the
   * lock was taken over or deleted).
   */
  extend(hash: string, entry: Entry, expiry: number, fence?: bigint): Promise<Entry | undefined> {
    return this.#queue.run(true, () => moveEntry(this, this.lockPath(hash), entry, expiry, "extend a lock in", fence));
  }

  /**
   * Deletes our entry (and the lock directory, if still empty). Resolves to `"released"`, or, when
   * the entry was already gone, `"taken"` (another holder's entry is there) or `"expired"`.
   */
  release(hash: string, entry: Entry): Promise<"released" | "taken" | "expired"> {
    return this.#queue.run(true, () => this.#release(hash, entry));
  }

  #release(hash: string, entry: Entry): Promise<"released" | "taken" | "expired"> {
    const lock = this.lockPath(hash);
    // Reactions, not async frames: a release is answered as soon as its rename is.
    return this.#vacate(lock, hash, entry).then((vacated) =>
      vacated
        ? "released"
        : this.readOwner(lock).then((holder) =>
            holder !== undefined && holder.token !== entry.token ? "taken" : "expired",
          ),
    );
  }

  /**
   * Moves our entry out of `lock` (false when it was gone already), leaving the lock directory
   * empty, which is free: the entry, an empty directory, becomes a spare for the next attempt,
   * named after the key (`H.tmp-T`) so that the rename is an event about the key for the waiters'
   * watchers. Without room for another spare (or closed, or in a shared directory): removes the
   * entry and the lock directory as {@link removeEntry} does.
   */
  #vacate(lock: string, hash: string, entry: Entry): Promise<boolean> {
    const shared = this.shareMode !== undefined;
    if (!this.#spares.roomFor(shared)) return removeEntry(this, lock, entry, "release a lock in");
    const spare = this.#inDirectory(`${hash}.tmp-${entry.token}`);
    return this.fs.rename(under(lock, entry.name), spare).then(
      () => {
        this.#spares.keep(spare, shared);
        this.#spares.emptied(lock);
        return true;
      },
      (error: unknown) => {
        if (isGone(error)) return false;
        throw this.unavailable("release a lock in", error);
      },
    );
  }

  /** Tracks a removal nobody waits for (best effort: a failure is ignored), for `close()`. */
  tidy(removal: Promise<unknown>): void {
    this.#spares.tidy(removal);
  }

  /**
   * Removes the spares and the empty lock directories this store left (a lock taken meanwhile by
   * another stays); later releases remove their lock directory. Best effort.
   */
  close(): Promise<void> {
    return this.#spares.close();
  }

  /** The live-most entry of the lock directory `lock`, not queued (for operations in a slot). */
  async readOwner(lock: string): Promise<Entry | undefined> {
    let names: string[];
    try {
      names = await this.fs.readdir(lock);
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
   * The names in `dir`, or `undefined` when it does not exist; another failure is a
   * StoreUnavailableError saying what could not be done (`what`, as {@link unavailable} takes it).
   */
  async names(dir: string, what: string): Promise<string[] | undefined> {
    try {
      return await readdir(dir);
    } catch (error) {
      if (codeOf(error) === "ENOENT") return undefined;
      throw this.unavailable(what, error);
    }
  }

  /**
   * Every entry of `dir` (a lock, the readers or the queue of a read-write key, with `parse`
   * reading a name), stale or not, changing nothing; none when `dir` is absent.
   */
  entries(dir: string, parse: (name: string) => Entry | undefined = parseEntry): Promise<Entry[]> {
    return this.#queue.run(false, () => this.listEntries(dir, parse));
  }

  /** {@link entries}, not queued (for operations in a slot). */
  async listEntries(dir: string, parse: (name: string) => Entry | undefined = parseEntry): Promise<Entry[]> {
    const names = await readdir(dir).catch((error: unknown) => {
      if (isGone(error)) return [] as string[];
      throw this.unavailable("read a lock in", error);
    });
    return names.flatMap((name) => parse(name) ?? []);
  }

  /**
   * Takes over the entry with `token` in `dir` for this store's owner, recording the key field
   * `keyField` (see `adoption.ts`).
   */
  adoptEntry(dir: string, token: string, newToken: string, expiry: number, keyField: string): Promise<AdoptResult> {
    return this.#queue.run(true, () => adoptEntry(this, dir, token, newToken, expiry, keyField));
  }

  /** The next fencing token of `hash` (call only while holding its lock; see `fence-counter.ts`). */
  nextFencingToken(hash: string): Promise<bigint> {
    return this.#queue.run(true, () => drawFencingToken(this, hash));
  }

  /** Removes attempt directories older than `olderThanMs` (see `attempt-sweep.ts`); best effort. */
  sweepAttempts(olderThanMs: number): Promise<void> {
    return this.#queue.run(false, () => sweepAttempts(this.directory, olderThanMs));
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
