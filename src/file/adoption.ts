import { rename } from "node:fs/promises";
import { join } from "node:path";
import { type Entry, entryOf, remainingMs, takeable } from "./entry.js";
import { isGone } from "./fs-errors.js";
import type { FileStore } from "./store.js";

/** What {@link adoptEntry} answers: the new entry, or why there is none. */
export type AdoptResult = { readonly entry: Entry; readonly startedAt: number } | "taken" | "expired";

/**
 * Takes over the entry with `token` in `dir` (a lock, the readers of a read-write key, a
 * semaphore's weight directory) for `store`'s owner, in an operation in one of its slots: renames
 * it to an entry with `newToken`, a deadline `expiry` ms from now, the same fencing token and the
 * adopter's key field `keyField` (the adopter's owner may leave the key another room) — one
 * rename, so of two adopters of one entry exactly one succeeds (as of two extensions, or an
 * extension and a takeover). `"taken"` when another live entry holds `dir` instead, `"expired"`
 * when the entry is gone or its deadline passed. (A holder known dead does not matter: a
 * handed-off lease outlives the process that handed it off.)
 */
export async function adoptEntry(
  store: FileStore,
  dir: string,
  token: string,
  newToken: string,
  expiry: number,
  keyField: string,
): Promise<AdoptResult> {
  const entries = await store.listEntries(dir);
  const found = entries.find((entry) => entry.token === token);
  if (found !== undefined && remainingMs(found) > 0) {
    const startedAt = performance.now();
    const next = entryOf(newToken, expiry, found.acquiredAt, store.ownerField.field, found.fence, false, keyField);
    try {
      await rename(join(dir, found.name), join(dir, next.name));
      return { entry: next, startedAt };
    } catch (error) {
      if (!isGone(error)) throw store.unavailable("adopt a lock in", error);
    }
  }
  const others = await store.readOwner(dir);
  return others !== undefined && others.token !== token && !takeable(others) ? "taken" : "expired";
}
