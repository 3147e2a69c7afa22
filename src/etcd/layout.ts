import { newToken } from "../internal/token.js";

/*
 * Where an etcd locker keeps a key's holders: one etcd key per holder (or queued waiter of a
 * counted lock) under the key's directory, `<client namespace><prefix><bytes>:<key>/<slot>`, whose
 * value is `<token> <weight> <owner>`. The directory spells the key's length in bytes before it,
 * so no key's directory is a prefix of another's ("a" and "a/b" never share a range).
 */

/** A holder entry's parts, as read back from etcd. */
export interface Entry {
  readonly token: string;
  readonly weight: number;
  readonly owner: string;
}

/** The directory of a key, and the end of its range (the first key past it). */
export interface KeyDirectory {
  readonly start: Buffer;
  readonly end: Buffer;
}

/** The directory of `key` under `namespace` (the client's) and `prefix` (the locker's). */
export function directoryOf(namespace: Buffer, prefix: string, key: string): KeyDirectory {
  const name = `${prefix}${Buffer.byteLength(key, "utf8")}:${key}`;
  // "/" is 0x2f: every key of the directory sorts below the same name ending in "0" (0x30).
  return {
    start: Buffer.concat([namespace, Buffer.from(`${name}/`, "utf8")]),
    end: Buffer.concat([namespace, Buffer.from(`${name}0`, "utf8")]),
  };
}

/**
 * The key whose directory holds the etcd key `name` (a key of the client's namespace, without the
 * namespace and the locker's prefix: `<bytes>:<key>/<slot>`), or `undefined` when `name` is not an
 * entry of a key's directory.
 */
export function keyOfEntry(name: Buffer): string | undefined {
  const colon = name.indexOf(0x3a);
  if (colon < 1 || colon > 6) return undefined;
  const digits = name.subarray(0, colon).toString("latin1");
  if (!/^\d+$/.test(digits)) return undefined;
  const end = colon + 1 + Number(digits);
  if (name[end] !== 0x2f) return undefined;
  return name.subarray(colon + 1, end).toString("utf8");
}

/** A fresh holder token: a slot (names the etcd key) and a secret, `<16 hex>.<32 hex>`. */
export function freshToken(slot = newToken().slice(0, 16)): string {
  return `${slot}.${newToken()}`;
}

/** The slot of `token` (see {@link freshToken}), or undefined when it is not one of ours. */
export function slotOf(token: string): string | undefined {
  const dot = token.indexOf(".");
  return dot === 16 && token.length === 49 ? token.slice(0, 16) : undefined;
}

/** The etcd key of the entry with `token` in `directory`. */
export function entryKey(directory: KeyDirectory, token: string): Buffer {
  return Buffer.concat([directory.start, Buffer.from(slotOf(token) ?? token, "utf8")]);
}

/** The value stored for a holder. */
export function entryValue(token: string, weight: number, owner: string): Buffer {
  return Buffer.from(`${token} ${weight} ${owner}`, "utf8");
}

/**
 * Reads an entry's value; a value that is not one of ours weighs `limit` (it blocks the key
 * rather than letting holders in past it).
 */
export function parseEntry(value: Buffer, limit: number): Entry {
  const text = value.toString("utf8");
  const first = text.indexOf(" ");
  const second = first < 0 ? -1 : text.indexOf(" ", first + 1);
  const weight = second < 0 ? Number.NaN : Number(text.slice(first + 1, second));
  if (!Number.isSafeInteger(weight) || weight < 1) return { token: text, weight: limit, owner: "" };
  return { token: text.slice(0, first), weight, owner: text.slice(second + 1) };
}
