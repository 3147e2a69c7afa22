import { createHash } from "node:crypto";

/**
 * The 64-bit advisory lock id of a resource (`prefix + key`): the first 8 bytes of its SHA-256, as
 * a signed bigint (PostgreSQL's `bigint`). Two resources with the same id exclude each other (a
 * collision never lets two holders of one key in; it only makes two keys share one lock).
 */
export function lockId(resource: string): bigint {
  return createHash("sha256").update(resource, "utf8").digest().readBigInt64BE(0);
}

/**
 * The waiter marker of a lock id: the same 64 bits as two `int4` (PostgreSQL keeps advisory locks
 * taken with two `int4` keys apart from those taken with one `bigint`), so a waiter can announce
 * itself next to the lock without touching it.
 */
export function markerOf(id: bigint): [high: number, low: number] {
  return [Number(BigInt.asIntN(32, id >> 32n)), Number(BigInt.asIntN(32, id))];
}

/** The `LISTEN`/`NOTIFY` channel of every locker with `prefix`: short, lowercase, valid unquoted. */
export function channelOf(prefix: string): string {
  return `globallock_${createHash("sha256").update(prefix, "utf8").digest("hex").slice(0, 16)}`;
}

/** A resource's lock id as the text of a `bigint` parameter (see {@link lockIdText}). */
const ids = new Map<string, string>();
/** Resources whose id {@link lockIdText} remembers at most (the oldest is forgotten first). */
const REMEMBERED_IDS = 4096;

/**
 * {@link lockId} of `resource` as decimal text (what a `bigint` parameter is sent as), remembered
 * for the latest {@link REMEMBERED_IDS} resources: a lock and its release hash the key once, not
 * once each.
 */
export function lockIdText(resource: string): string {
  let id = ids.get(resource);
  if (id === undefined) {
    if (ids.size >= REMEMBERED_IDS) ids.delete(ids.keys().next().value as string);
    id = lockId(resource).toString();
    ids.set(resource, id);
  }
  return id;
}
