/**
 * The files of a {@link FileSemaphore}'s keys: its holders' permits and the waiting queue. For a
 * key whose hash is `H` (the hash of the key marked as a semaphore's, so that it never meets a
 * lock's or a read-write key's files of the same name; see `store.ts` for `H.fence`):
 *
 * ```
 * H.sem/<w>/<entry>        a holder of `w` permits: one entry, named like a lock's (`entry.ts`)
 * H.q/<seq>.w.<entry>      the waiting queue, as a read-write key's (`permits.ts`)
 * ```
 *
 * - **Counting without a lock.** An attempt first reads the permits in use, and makes its entry
 *   only if its weight fits; then it reads them again, its own entry included, and holds only if
 *   the total is within the limit — else it removes its entry and misses. Of any set of holders
 *   at one time, the one whose second read began last saw every other (each made its entry before
 *   its own second read, and an entry stays until its holder leaves): that read's total, at most
 *   the limit, covers them all. A weight's directory is read in one call, which a rename in it
 *   (an extension) cannot split, so an entry being extended is never missed.
 * - **Stale entries** (past their deadline, or of a dead holder) count until removed, by name, as
 *   a lock's are (`FileStore.removeStale`): of a removal and an extension exactly one succeeds, so
 *   a permit is never both taken over and kept.
 * - **Releases are events.** A release (and an attempt stepping back) moves its entry out of
 *   `H.sem` to the lock directory's top level (`H.tmp-T`), then removes it: waiters watch the
 *   top level (see `FileReleaseWatcher`), which events inside `H.sem` never reach. A waiter's ticket
 *   leaves the queue the same way, so the waiter behind it hears that it is first now.
 * - Empty weight directories and `H.sem` are removed by whoever empties them (an attempt that
 *   finds its directory gone makes it again).
 */
import { mkdir, readdir, rename, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { newToken } from "../internal/token.js";
import { totalWeight } from "../internal/total-weight.js";
import { type Entry, entryOf, parseEntry, remainingMs, takeable } from "./entry.js";
import { moveEntry, removeStale } from "./entry-moves.js";
import { codeOf, isGone } from "./fs-errors.js";
import type { EntryPlace } from "./held-entries.js";
import { type PermitFiles, type Ticket, ticketEntry, ticketName } from "./permits.js";
import type { FileStore } from "./store.js";

/** A holder's permits: its entry in the directory of its weight. */
export interface Permit {
  readonly weight: number;
  readonly entry: Entry;
}

/** What one attempt saw: it holds `entry`, or it missed (the holders' soonest deadline, if any). */
export type SemaphoreTake =
  | { readonly taken: true; readonly entry: Entry; readonly startedAt: number }
  | { readonly taken: false; readonly retryAfterMs: number | undefined };

/** Rounds of one operation that found the files changing under it before it gives up. */
const ROUNDS = 4;
/** A weight directory's name. */
const WEIGHT = /^[1-9]\d{0,15}$/;

const ignore = (): undefined => undefined;

/** The retry hint of a miss: just past the soonest holder's deadline (a stopped holder's lapses then). */
function soonest(permits: readonly Permit[]): number | undefined {
  let least: number | undefined;
  for (const { entry } of permits) {
    const left = remainingMs(entry);
    if (least === undefined || left < least) least = left;
  }
  return least === undefined ? undefined : Math.max(1, least + 2);
}

/** The holders' files and the queue of the semaphore keys of one lock directory (see the module comment). */
export class SemaphoreFiles implements EntryPlace {
  readonly #store: FileStore;
  /** The queue's files (`H.q`), as a read-write key's. */
  readonly queue: PermitFiles;

  /**
   * @param store the lock files of the directory (its slots bound every operation here).
   * @param queue the keys' queue files.
   */
  constructor(store: FileStore, queue: PermitFiles) {
    this.#store = store;
    this.queue = queue;
  }

  /** The holders' directory of `hash`. */
  holdersPath(hash: string): string {
    return join(this.#store.directory, `${hash}.sem`);
  }

  /** The directory of `hash`'s holders of `weight` permits. */
  weightPath(hash: string, weight: number): string {
    return join(this.holdersPath(hash), String(weight));
  }

  /**
   * One attempt to take `weight` of `limit` permits of `hash` for `token`, with a lease of `expiry`
   * ms (see the module comment); the entry records the key field `keyField` (see `key-field.ts`).
   */
  take(
    hash: string,
    token: string,
    weight: number,
    limit: number,
    expiry: number,
    keyField: string,
  ): Promise<SemaphoreTake> {
    return this.#store.run(false, async () => {
      const before = await this.#live(hash);
      if (before === undefined) return { taken: false, retryAfterMs: undefined };
      if (totalWeight(before) + weight > limit) return { taken: false, retryAfterMs: soonest(before) };
      const dir = this.weightPath(hash, weight);
      const startedAt = performance.now();
      const entry = entryOf(token, expiry, Date.now(), this.#store.ownerField.field, undefined, false, keyField);
      if (!(await this.#make(hash, dir, entry))) return { taken: false, retryAfterMs: undefined };
      let after: Permit[] | undefined;
      try {
        after = await this.#live(hash);
      } catch (error) {
        await this.#vacate(hash, dir, entry).catch(ignore);
        throw error;
      }
      const mine = after?.some((permit) => permit.entry.name === entry.name) === true;
      if (after !== undefined && mine && totalWeight(after) <= limit) return { taken: true, entry, startedAt };
      // Stepped back: the move out of the holders' directory wakes whoever it kept waiting.
      if (mine || after === undefined) await this.#vacate(hash, dir, entry);
      return { taken: false, retryAfterMs: after === undefined ? undefined : soonest(after) };
    });
  }

  /** The live permits of `hash`, read without changing anything (for `inspect`). */
  async held(hash: string): Promise<Permit[]> {
    return this.#store.run(false, async () => {
      const permits = await this.#read(hash);
      return permits.filter((permit) => !takeable(permit.entry));
    });
  }

  /** Moves a holder's entry to a new deadline; `undefined` when it is gone (taken over). */
  extend(hash: string, permit: Permit, expiry: number): Promise<Entry | undefined> {
    const dir = this.weightPath(hash, permit.weight);
    return this.#store.run(true, () => moveEntry(this.#store, dir, permit.entry, expiry, "extend a permit in"));
  }

  /**
   * Extends a holder's entry once for a hand-off, with an entry that names no process (see
   * `FileStore.moveEntry`); `undefined` when it is gone.
   */
  detach(hash: string, permit: Permit, expiry: number): Promise<Entry | undefined> {
    const dir = this.weightPath(hash, permit.weight);
    return this.#store.run(true, () =>
      moveEntry(this.#store, dir, permit.entry, expiry, "hand off a permit in", permit.entry.fence, true),
    );
  }

  /** Records `fence` in a holder's entry (a fenced grant's confirmation); `undefined` when it is gone. */
  fence(hash: string, permit: Permit, expiry: number, fence: bigint): Promise<Entry | undefined> {
    const dir = this.weightPath(hash, permit.weight);
    return this.#store.run(true, () => moveEntry(this.#store, dir, permit.entry, expiry, "fence a permit in", fence));
  }

  /** Removes a holder's entry: `"released"`, or `"expired"` when it was gone already. */
  release(hash: string, permit: Permit): Promise<"released" | "expired"> {
    const dir = this.weightPath(hash, permit.weight);
    return this.#store.run(true, async () => ((await this.#vacate(hash, dir, permit.entry)) ? "released" : "expired"));
  }

  /**
   * Removes `ticket` from `hash`'s queue by moving it out to the top level first: an event that
   * wakes the waiters behind it (see the module comment).
   */
  leave(hash: string, ticket: Ticket): Promise<void> {
    return this.#store.run(true, async () => {
      const dir = this.queue.queuePath(hash);
      await this.#moveOut(hash, join(dir, ticketName(ticket)));
      await rmdir(dir).catch(ignore);
    });
  }

  /** Removes the ticket with `token` from `hash`'s queue (see {@link leave}), if it is there. */
  leaveByToken(hash: string, token: string): Promise<void> {
    return this.#store.run(true, async () => {
      const dir = this.queue.queuePath(hash);
      const names = await readdir(dir).catch(() => [] as string[]);
      const name = names.find((candidate) => ticketEntry(candidate)?.token === token);
      if (name !== undefined) await this.#moveOut(hash, join(dir, name));
      await rmdir(dir).catch(ignore);
    });
  }

  /**
   * Makes `entry` in `dir` (a weight's directory of `hash`), making the directories it needs;
   * false when they kept vanishing (emptied and removed by others meanwhile).
   */
  async #make(hash: string, dir: string, entry: Entry): Promise<boolean> {
    for (let round = 0; round < ROUNDS; round++) {
      if (round > 0) {
        await this.#store.makeDirectory(this.holdersPath(hash), 0o700).catch(ignore);
        await this.#store.makeDirectory(dir, 0o700).catch(ignore);
      }
      try {
        await mkdir(join(dir, entry.name));
        return true;
      } catch (error) {
        if (codeOf(error) !== "ENOENT") throw this.#store.unavailable("add a permit in", error);
      }
    }
    return false;
  }

  /**
   * The live permits of `hash`, after removing the stale ones it found; `undefined` when the
   * entries kept changing under it.
   */
  async #live(hash: string): Promise<Permit[] | undefined> {
    for (let round = 0; round < ROUNDS; round++) {
      const permits = await this.#read(hash);
      let changed = false;
      for (const permit of permits) {
        if (!takeable(permit.entry)) continue;
        changed = true;
        const dir = this.weightPath(hash, permit.weight);
        if (await removeStale(this.#store, dir, permit.entry)) await this.#tidy(hash, dir);
      }
      if (!changed) return permits;
    }
    return undefined;
  }

  /** Every entry of `hash`'s holders, stale or not. */
  async #read(hash: string): Promise<Permit[]> {
    const holders = this.holdersPath(hash);
    const weights = await this.#names(holders);
    const permits: Permit[] = [];
    for (const name of weights) {
      if (!WEIGHT.test(name)) continue;
      const weight = Number(name);
      for (const entryName of await this.#names(join(holders, name))) {
        const entry = parseEntry(entryName);
        if (entry !== undefined) permits.push({ weight, entry });
      }
    }
    return permits;
  }

  /** The names in `dir`; none when it is gone. */
  async #names(dir: string): Promise<string[]> {
    try {
      return await readdir(dir);
    } catch (error) {
      if (isGone(error)) return [];
      throw this.#store.unavailable("read the permits in", error);
    }
  }

  /** Moves `entry` out of `dir` (see {@link #moveOut}) and tidies up; false when it was gone. */
  async #vacate(hash: string, dir: string, entry: Entry): Promise<boolean> {
    const moved = await this.#moveOut(hash, join(dir, entry.name));
    if (moved) await this.#tidy(hash, dir);
    return moved;
  }

  /**
   * Moves the empty directory `path` (an entry or a ticket) to `H.tmp-T` at the top level, and
   * removes it there: only the one who moves it succeeds. False when it was gone. (One left behind
   * by a process killed in between is swept with the attempt directories.)
   */
  async #moveOut(hash: string, path: string): Promise<boolean> {
    const out = join(this.#store.directory, `${hash}.tmp-${newToken()}`);
    try {
      await rename(path, out);
    } catch (error) {
      if (isGone(error)) return false;
      throw this.#store.unavailable("remove a permit in", error);
    }
    await rmdir(out).catch(ignore);
    return true;
  }

  /** Removes the weight directory `dir` and then `H.sem`, each only if empty. */
  async #tidy(hash: string, dir: string): Promise<void> {
    await rmdir(dir).catch(ignore);
    await rmdir(this.holdersPath(hash)).catch(ignore);
  }
}
