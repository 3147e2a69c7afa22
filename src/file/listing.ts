/**
 * `list` on the file store (see `Listing` in `backend.ts`): the lock directory read as a
 * stream, a batch of names at a time (`opendir`: never the whole listing in memory, and nothing
 * held or locked while it reads), each key's files found by their names (`H.lock`, `H.rd`,
 * `H.sem`), the key read back from a live entry (see `key-field.ts`), then the key's view as
 * `inspect` reads it.
 */
import { opendir } from "node:fs/promises";
import type { ListedResource, StoredView } from "../backend.js";
import { StoreUnavailableError } from "../errors.js";
import { type Entry, takeable } from "./entry.js";
import { isGone } from "./fs-errors.js";
import { readKey } from "./key-field.js";
import type { FileStore } from "./store.js";

/** Keys a listing reads at once (each read waits for one of the store's slots). */
const LIST_CONCURRENCY = 16;

/** Names the lock directory's reads hand over at once. */
const DIRECTORY_BATCH = 256;

/** One kind of key of a lock directory, as a file backend lists it. */
export interface ListedKind {
  /**
   * The suffixes of the directories that hold its holders' entries (`lock`, `rd`, `sem`): a key
   * is a candidate when one of them is there.
   */
  readonly places: readonly string[];
  /** The mark of its keys before they are hashed (a lock's, a read-write key's, a semaphore's). */
  readonly mark: (key: string) => string;
  /** The entries (stale or not) of the key hashed to `hash`, in its directory `place`. */
  entries(hash: string, place: string): Promise<Entry[]>;
  /** The view of the key hashed to `hash`, as `inspect` reads it. */
  view(hash: string): Promise<StoredView>;
}

/**
 * Up to `limit` held keys of `kind` whose caller's key starts with `prefix`, in the order the
 * directory lists them. A key is named by a live entry of its holders (stale ones, past their
 * deadline or of a dead holder, are left out, as `inspect` leaves them out) whose recorded key
 * hashes to the entry's files: entries written before keys were recorded, and keys of another
 * kind of locker sharing the directory, are skipped. It is listed when its view has a holder.
 */
export async function listKeys(
  store: FileStore,
  kind: ListedKind,
  prefix: string,
  limit: number,
): Promise<ListedResource[]> {
  const names = new RegExp(`^([0-9a-f]{64})\\.(${kind.places.join("|")})$`);
  const listed: ListedResource[] = [];
  /** Hashes already listed (a read-write key has two places). */
  const named = new Set<string>();
  const take = async (batch: ReadonlyArray<readonly [string, string]>): Promise<void> => {
    const keys = await Promise.all(batch.map(([hash, place]) => (named.has(hash) ? undefined : keyOf(hash, place))));
    const found: Array<readonly [string, string]> = [];
    batch.forEach(([hash], index) => {
      const key = keys[index];
      if (key === undefined || !key.startsWith(prefix) || named.has(hash)) return;
      named.add(hash);
      found.push([hash, key]);
    });
    const views = await Promise.all(found.map(([hash]) => kind.view(hash)));
    found.forEach(([, key], index) => {
      const view = views[index] as StoredView;
      if (view.holders.length > 0 && listed.length < limit) listed.push({ key, view });
    });
  };
  const keyOf = async (hash: string, place: string): Promise<string | undefined> => {
    for (const entry of await kind.entries(hash, place)) {
      if (entry.keyField === "" || takeable(entry)) continue;
      const key = await readKey(store.directory, hash, entry.keyField, kind.mark);
      if (key !== undefined) return key;
    }
    return undefined;
  };
  try {
    const directory = await opendir(store.directory, { bufferSize: DIRECTORY_BATCH });
    let batch: Array<readonly [string, string]> = [];
    // The iterator closes the directory when the loop ends, returns or throws.
    for await (const dirent of directory) {
      const match = names.exec(dirent.name);
      if (match === null) continue;
      batch.push([match[1] as string, match[2] as string]);
      if (batch.length < LIST_CONCURRENCY) continue;
      await take(batch);
      batch = [];
      if (listed.length >= limit) return listed;
    }
    await take(batch);
    return listed;
  } catch (error) {
    if (error instanceof StoreUnavailableError) throw error;
    if (isGone(error)) return listed;
    throw store.unavailable("list the locks in", error);
  }
}
