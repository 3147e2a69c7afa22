/**
 * The files of a {@link FileReadWriteLocker}'s keys: readers and the waiting queue beside the
 * writer's lock. For a key whose hash is `H` (see `store.ts` for `H.lock` and `H.fence`):
 *
 * ```
 * H.lock/<entry>           a writer: exactly a lock of the file store (take, extend, release)
 * H.rd/<entry>             the readers: one entry each, named like a lock's entry (`entry.ts`)
 * H.q/<seq>.<r|w>.<entry>  the waiting queue: one ticket per waiter, ordered by `seq` (when it
 *                          joined, on the boot's monotonic clock, 16 digits), then its token
 * ```
 *
 * - **A reader** makes its entry in `H.rd` first, then reads `H.lock`: free (or stale: taken over)
 *   means it holds; a live writer means it removes its entry again and waits.
 * - **A writer** takes `H.lock` like a lock, then makes sure no reader holds: it removes stale
 *   reader entries and then `H.rd` itself, which succeeds only when it is empty. A live reader
 *   (or a directory that is not empty) means it releases `H.lock` again and waits.
 * - Both sides write first and look second, so of a reader and a writer racing at least one sees
 *   the other (every step is one atomic call on a local file system): never both hold. An entry
 *   is extended by renaming it to a later deadline and is removed by name, as a lock's is; a dead
 *   or stopped holder of either kind is taken over as a lock's is (`FileStore.removeStale`).
 * - **The queue** is only about order, never about safety: a waiter that missed takes a ticket; a
 *   writer may take the key only when no live ticket is ahead of its own, a reader when no
 *   writer's ticket is. So a waiting writer blocks readers that come after it, and readers queued
 *   before a writer get in together. A ticket is refreshed at each attempt, removed on success or
 *   when its waiter gives up; a ticket past its deadline or of a dead process is removed by whoever
 *   finds it.
 * - The last reader to leave removes `H.rd`, and a release of `H.lock` removes it: the events
 *   that wake waiters watching the directory.
 * - A `FileLocker`'s waiters queue the same way, as writers (`H.q/<seq>.w.<entry>` beside its
 *   `H.lock`; see `lock-queue.ts`).
 */
import { mkdir, readdir, rename, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { type Entry, entryOf, parseEntry, takeable } from "./entry.js";
import { moveEntry, removeEntry, removeStale } from "./entry-moves.js";
import { codeOf } from "./fs-errors.js";
import { monotonicNow } from "./host.js";
import type { FileStore, TakeResult } from "./store.js";

/** A waiter's place in a key's queue. */
export interface Ticket {
  readonly seq: number;
  readonly writer: boolean;
  readonly entry: Entry;
}

const TICKET = /^(\d{16})\.([rw])\.(.+)$/;
/** Rounds of one operation that found the files changing under it before it gives up. */
const ROUNDS = 4;

const ignore = (): undefined => undefined;

/** The entry a queue ticket's name carries; `undefined` for another name. */
export function ticketEntry(name: string): Entry | undefined {
  const match = TICKET.exec(name);
  return match === null ? undefined : parseEntry(match[3] as string);
}

/** The name of `ticket` in its queue directory: `<seq>.<r|w>.<entry>` (see the module comment). */
export function ticketName(ticket: Ticket): string {
  return `${String(ticket.seq).padStart(16, "0")}.${ticket.writer ? "w" : "r"}.${ticket.entry.name}`;
}

/** Removes the ticket `name` (if any) from the queue directory `dir`, then `dir` if that emptied it. */
async function removeTicket(dir: string, name: string | undefined): Promise<void> {
  if (name !== undefined) await rmdir(join(dir, name)).catch(ignore);
  await rmdir(dir).catch(ignore);
}

/** Whether ticket `a` is ahead of ticket `b`. */
export function ahead(a: Ticket, b: Ticket): boolean {
  return a.seq < b.seq || (a.seq === b.seq && a.entry.token < b.entry.token);
}

export class PermitFiles {
  readonly #store: FileStore;

  constructor(store: FileStore) {
    this.#store = store;
  }

  /** The readers' directory of `hash`. */
  readersPath(hash: string): string {
    return this.#path(hash, "rd");
  }

  /** The queue's directory of `hash`. */
  queuePath(hash: string): string {
    return this.#path(hash, "q");
  }

  #path(hash: string, suffix: string, name?: string): string {
    const dir = join(this.#store.directory, `${hash}.${suffix}`);
    return name === undefined ? dir : join(dir, name);
  }

  /** The live tickets of `hash`, first in line first (removes the stale ones it finds). */
  tickets(hash: string): Promise<Ticket[]> {
    return this.#store.run(false, async () => {
      const dir = this.#path(hash, "q");
      const names = (await this.#store.names(dir, "read a queue in")) ?? [];
      const live: Ticket[] = [];
      for (const name of names) {
        const match = TICKET.exec(name);
        const entry = match === null ? undefined : parseEntry(match[3] as string);
        if (match === null || entry === undefined) continue;
        const ticket = { seq: Number(match[1]), writer: match[2] === "w", entry };
        if (takeable(entry)) await rmdir(join(dir, name)).catch(ignore);
        else live.push(ticket);
      }
      return live.sort((a, b) => (ahead(a, b) ? -1 : 1));
    });
  }

  /**
   * Keeps `own` (this waiter's ticket, if it has one) for `ttl` ms more — refreshed only once half
   * of it is gone — or takes a new ticket at the end of the queue. Resolves to the ticket as it
   * now is.
   */
  register(hash: string, writer: boolean, token: string, ttl: number, own: Ticket | undefined): Promise<Ticket> {
    return this.#store.run(false, async () => {
      const dir = this.#path(hash, "q");
      if (own !== undefined) {
        if (own.entry.deadline - monotonicNow() > ttl / 2) return own;
        const next = { ...own, entry: entryOf(own.entry.token, ttl, own.entry.acquiredAt) };
        const moved = await rename(join(dir, ticketName(own)), join(dir, ticketName(next))).then(
          () => true,
          () => false,
        );
        if (moved) return next;
      }
      for (let round = 0; ; round++) {
        const ticket = { seq: monotonicNow(), writer, entry: entryOf(token, ttl, Date.now()) };
        // The queue directory usually exists (someone waits): made only after a miss says it does not.
        if (round > 0) await this.#store.makeDirectory(dir, 0o700).catch(ignore);
        try {
          await mkdir(join(dir, ticketName(ticket)));
          return ticket;
        } catch (error) {
          if (codeOf(error) !== "ENOENT" || round === ROUNDS) throw this.#store.unavailable("join a queue in", error);
        }
      }
    });
  }

  /** Removes the ticket with `token` from `hash`'s queue (and the queue, once empty). */
  leave(hash: string, token: string): Promise<void> {
    return this.#store.run(true, async () => {
      const dir = this.#path(hash, "q");
      const names = await readdir(dir).catch(() => [] as string[]);
      const name = names.find((candidate) => TICKET.exec(candidate)?.[3]?.startsWith(`${token}.`));
      await removeTicket(dir, name);
    });
  }

  /** Removes `ticket` (its name known) from `hash`'s queue (and the queue, once empty). */
  leaveTicket(hash: string, ticket: Ticket): Promise<void> {
    return this.#store.run(true, () => removeTicket(this.#path(hash, "q"), ticketName(ticket)));
  }

  /**
   * One attempt of a reader: its entry (recording the key field `keyField`), unless a live writer
   * holds `hash`'s lock.
   */
  takeRead(hash: string, token: string, expiry: number, keyField: string): Promise<TakeResult> {
    return this.#store.run(false, async () => {
      const dir = this.#path(hash, "rd");
      const lock = this.#store.lockPath(hash);
      for (let round = 0; round < ROUNDS; round++) {
        const startedAt = performance.now();
        const entry = entryOf(token, expiry, Date.now(), this.#store.ownerField.field, undefined, false, keyField);
        await this.#store.makeDirectory(dir, 0o700).catch(ignore);
        try {
          await mkdir(join(dir, entry.name));
        } catch (error) {
          if (codeOf(error) === "ENOENT") continue; // the last reader removed the directory meanwhile
          throw this.#store.unavailable("add a reader in", error);
        }
        // Our entry is there: a writer taking the lock from now on sees it. Now look at the writer.
        for (let look = 0; look < ROUNDS; look++) {
          const holder = await this.#store.readOwner(lock);
          if (holder === undefined) return { taken: true, entry, startedAt };
          if (!takeable(holder)) {
            await this.#removeReader(dir, entry);
            return { taken: false, holder };
          }
          await removeStale(this.#store, lock, holder);
          await rmdir(lock).catch(ignore);
        }
        await this.#removeReader(dir, entry);
        return { taken: false, holder: undefined };
      }
      return { taken: false, holder: undefined };
    });
  }

  /**
   * Called by a writer that holds `hash`'s lock: true when no reader holds (stale readers are
   * taken over, and the readers' directory is removed, which succeeds only when it is empty).
   */
  noReaders(hash: string): Promise<boolean> {
    return this.#store.run(false, async () => {
      const dir = this.#path(hash, "rd");
      for (let round = 0; round < ROUNDS; round++) {
        const names = await this.#store.names(dir, "read the readers in");
        if (names === undefined) return true;
        let changed = false;
        for (const name of names) {
          const entry = parseEntry(name);
          if (entry !== undefined && !takeable(entry)) return false;
          if (entry !== undefined && !(await removeStale(this.#store, dir, entry))) changed = true;
        }
        if (changed) continue;
        try {
          await rmdir(dir);
          return true;
        } catch (error) {
          const code = codeOf(error);
          if (code === "ENOENT") return true;
          if (code !== "ENOTEMPTY" && code !== "EEXIST") throw this.#store.unavailable("read the readers in", error);
        }
      }
      return false;
    });
  }

  /** Moves a reader's entry to a new deadline; `undefined` when it is gone (taken over). */
  extendRead(hash: string, entry: Entry, expiry: number): Promise<Entry | undefined> {
    const dir = this.#path(hash, "rd");
    return this.#store.run(true, () => moveEntry(this.#store, dir, entry, expiry, "extend a read lease in"));
  }

  /** Removes a reader's entry: `"released"`, or (gone already) `"taken"` by a writer or `"expired"`. */
  releaseRead(hash: string, entry: Entry): Promise<"released" | "taken" | "expired"> {
    return this.#store.run(true, async () => {
      if (await removeEntry(this.#store, this.#path(hash, "rd"), entry, "release a read lease in")) return "released";
      const holder = await this.#store.readOwner(this.#store.lockPath(hash));
      return holder !== undefined && !takeable(holder) ? "taken" : "expired";
    });
  }

  async #removeReader(dir: string, entry: Entry): Promise<void> {
    await rmdir(join(dir, entry.name)).catch(ignore);
    await rmdir(dir).catch(ignore);
  }
}
