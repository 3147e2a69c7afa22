/**
 * How a holder's entry records the caller's key (see `entry.ts`), so that `list` can name held
 * keys: lock files are named by the key's hash, which cannot be read back. The key rides in the
 * entry's owner field, after the owner and {@link KEY_SEPARATOR}, at no cost: the entry's one
 * `mkdir` or rename writes it. The key field is the key percent-encoded (`encodeURIComponent`, and
 * `.` as `%2E`, as the owner is). A key too long for the room the name leaves (see
 * {@link keyRoom}), or one that is not well-formed UTF-16 (a lone surrogate), is written to a key
 * file instead, `.key-<H>` in the lock directory (`H`: the hash the key's files are named by),
 * holding the key as a JSON string, and the field is {@link KEY_IN_FILE}. A locker writes a key's
 * file once, beside its first take of the key (not on its path), and key files are not removed
 * (one per distinct long key). A reader trusts a key only if it hashes to the files it was found
 * in: a key file half made, or an entry of another kind of key, is never taken for the key.
 */
import { readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { newToken } from "../internal/token.js";
import { hashKey } from "./directory.js";
import { KEY_SEPARATOR, MAX_HOLDER_FIELDS } from "./entry.js";
import type { FileStore } from "./store.js";

/** The key field of a key written to its key file (`%%` never appears in a percent-encoding). */
export const KEY_IN_FILE = "%%";

/** Keys whose file a locker remembers having written; past it, it forgets them all and writes again. */
const KEY_FILES_REMEMBERED = 4096;

/** The longest key field that an entry with the owner field `ownerField` can carry. */
export function keyRoom(ownerField: string): number {
  return MAX_HOLDER_FIELDS - ownerField.length - KEY_SEPARATOR.length;
}

/**
 * The key field of `key` in an entry with `room` characters for it (see {@link keyRoom}): the key
 * percent-encoded, or {@link KEY_IN_FILE} when that is too long or the key is not well-formed;
 * `""` (no key recorded) where the owner leaves no room even for that (a host name of 50
 * characters or more).
 */
export function keyField(key: string, room: number): string {
  if (room < KEY_IN_FILE.length) return "";
  let encoded: string;
  try {
    encoded = encodeURIComponent(key).replace(/\./g, "%2E");
  } catch {
    return KEY_IN_FILE; // a lone surrogate (URIError)
  }
  return encoded.length <= room ? encoded : KEY_IN_FILE;
}

/** The name of the key file of the key whose files are named by `hash`. */
export function keyFileName(hash: string): string {
  return `.key-${hash}`;
}

/**
 * The key an entry's key field `field` names, found among the files of `hash` in `directory`:
 * decoded, or read from the key file; `undefined` when there is none (an entry written before keys
 * were recorded, a key file gone) or when it does not hash to `hash` once marked with `mark` (a
 * key of another kind of locker, whose files are named apart; a field not written by this module).
 */
export async function readKey(
  directory: string,
  hash: string,
  field: string,
  mark: (key: string) => string,
): Promise<string | undefined> {
  let key: unknown;
  if (field === "") return undefined;
  if (field === KEY_IN_FILE) {
    try {
      key = JSON.parse(await readFile(join(directory, keyFileName(hash)), "utf8"));
    } catch {
      return undefined;
    }
  } else {
    try {
      key = decodeURIComponent(field);
    } catch {
      return undefined;
    }
  }
  return typeof key === "string" && hashKey(mark(key)) === hash ? key : undefined;
}

/**
 * The key fields of one locker's entries, and the key files they need: the field of the key last
 * asked for is kept (a key used again and again is encoded once), and a key's file is written
 * once, in the background (in one of the store's slots, and followed for its `close()`), the first
 * time its key needs one.
 */
export class KeyFields {
  readonly #store: FileStore;
  readonly #room: number;
  /** The hashes whose key file this locker wrote (or is writing). */
  readonly #written = new Set<string>();
  #lastKey: string | undefined;
  #lastField = "";

  /** @param store the lock files whose entries carry the fields (the key gets what their owner leaves). */
  constructor(store: FileStore) {
    this.#store = store;
    this.#room = keyRoom(store.ownerField.field);
  }

  /** The key field of `key`, whose files are named by `hash`; its key file is written if it needs one. */
  of(key: string, hash: string): string {
    if (key !== this.#lastKey) {
      this.#lastField = keyField(key, this.#room);
      this.#lastKey = key;
    }
    if (this.#lastField === KEY_IN_FILE && !this.#written.has(hash)) this.#write(hash, key);
    return this.#lastField;
  }

  #write(hash: string, key: string): void {
    if (this.#written.size >= KEY_FILES_REMEMBERED) this.#written.clear();
    this.#written.add(hash);
    const store = this.#store;
    // A failure is forgotten: the key's next take writes the file again.
    const writing = store.run(false, () => writeKeyFile(store.directory, hash, key));
    store.tidy(writing.catch(() => this.#written.delete(hash)));
  }
}

/**
 * Writes the key file of `hash` (see the module comment): a new file renamed into place, so a
 * reader never sees it half written. Files of one key have one content: a second writer is harmless.
 */
async function writeKeyFile(directory: string, hash: string, key: string): Promise<void> {
  const tmp = join(directory, `.tmp-${newToken()}`);
  await writeFile(tmp, JSON.stringify(key), { mode: 0o644 });
  await rename(tmp, join(directory, keyFileName(hash))).catch(async (error: unknown) => {
    await unlink(tmp).catch(() => undefined);
    throw error;
  });
}
