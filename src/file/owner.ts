/**
 * How a lock entry carries its holder's `owner` (see `entry.ts`): in its name, at no cost. The
 * owner field is the owner percent-encoded (`encodeURIComponent`, and `.` as `%2E`, so the field
 * has no dot and no slash). An owner too long for a name once encoded (the name's other fields
 * leave {@link MAX_OWNER_FIELD} characters: 70 on a host named `vm`, fewer with a longer host
 * name, which the default owner `hostname:pid` repeats) is written once per
 * locker to an owner file, `.owner-<SHA-256 of the owner, 32 hex digits>` in the lock directory,
 * and the field is `%%` and that hash (`%%` never appears in a percent-encoding).
 */
import { createHash } from "node:crypto";
import { readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { StoredHolder } from "../backend.js";
import { newToken } from "../internal/token.js";
import { type Entry, MAX_OWNER_FIELD, remainingMs } from "./entry.js";

/** What starts an owner field that refers to an owner file. */
const REFERENCE = "%%";

/** The owner as the lock entries of one locker carry it, and the owner file it needs, if any. */
export interface OwnerField {
  /** The field (see the module comment). */
  readonly field: string;
  /** The owner file's name when the field refers to one; `undefined` when the field is the owner. */
  readonly file: string | undefined;
}

/** The owner field of `owner` (at most 256 bytes; see the module comment). */
export function ownerField(owner: string): OwnerField {
  const encoded = encodeURIComponent(owner).replace(/\./g, "%2E");
  if (encoded.length <= MAX_OWNER_FIELD) return { field: encoded, file: undefined };
  const hash = createHash("sha256").update(owner, "utf8").digest("hex").slice(0, 32);
  return { field: `${REFERENCE}${hash}`, file: `.owner-${hash}` };
}

/**
 * Writes the owner file `owner.file` (if any) in `directory`: a new file renamed into place, so a
 * reader never sees it half written. Files of one owner have one content: a second writer is harmless.
 */
export async function writeOwnerFile(directory: string, owner: string, field: OwnerField): Promise<void> {
  if (field.file === undefined) return;
  const tmp = join(directory, `.tmp-${newToken()}`);
  await writeFile(tmp, owner, { mode: 0o600 });
  await rename(tmp, join(directory, field.file)).catch(async (error: unknown) => {
    await unlink(tmp).catch(() => undefined);
    throw error;
  });
}

/**
 * The owner an entry's owner field names: decoded, or read from its owner file in `directory`
 * (`""` when that file is gone, or the field is not one this module wrote).
 */
export async function readOwner(directory: string, field: string): Promise<string> {
  if (!field.startsWith(REFERENCE)) {
    try {
      return decodeURIComponent(field);
    } catch {
      return "";
    }
  }
  const hash = field.slice(REFERENCE.length);
  if (!/^[0-9a-f]{32}$/.test(hash)) return "";
  return readFile(join(directory, `.owner-${hash}`), "utf8").catch(() => "");
}

/**
 * A holder as `inspect` shows it: `entry`'s owner (read back from `directory` where the entry
 * refers to an owner file), `weight`, its time left as the store measures it (see `remainingMs`)
 * and its fencing token, if it has one.
 */
export async function storedHolder(directory: string, entry: Entry, weight: number): Promise<StoredHolder> {
  const owner = await readOwner(directory, entry.owner);
  const expiresInMs = Math.max(0, remainingMs(entry));
  return entry.fence === undefined
    ? { owner, weight, expiresInMs }
    : { owner, weight, expiresInMs, fencingToken: entry.fence };
}
