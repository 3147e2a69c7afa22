import { createHash } from "node:crypto";
import { InvalidArgumentError } from "../errors.js";

/*
 * What a Memcached locker writes: one item per held lock, `<prefix><key>`, whose value is
 * `gl1 <token> <lease ms> <written at, epoch ms> <owner, URI-encoded>`; and two items per prefix
 * that guard against a server that lost its items (see restart-guard.ts), `<prefix>#epoch` and
 * `<prefix>#restarted`.
 */

/** Memcached's longest key, in bytes. */
const MAX_MEMCACHED_KEY_BYTES = 250;

/** Starts the name of a hashed key (a caller's key that starts with it is hashed too). */
const HASH_MARK = "#";

/** A hashed key's name after the prefix: the mark and a SHA-256 in base64url (43 characters). */
const HASHED_NAME_BYTES = HASH_MARK.length + 43;

/**
 * Printable ASCII but space and `$`. Memcached refuses spaces and control characters in keys;
 * the `memcached` client puts a key back into its command with `String.prototype.replace`, where
 * `$&`, `$'`, `` $` `` and `$$` in the replacement are patterns — a key with `$` would be sent as
 * another key, and not the same one from one command to the next.
 */
const PLAIN = /^[\x21-\x23\x25-\x7e]*$/;

/** The version tag that starts every lock item's value. */
const VALUE_TAG = "gl1";

/** A lock item's value, as read back. */
export interface LockValue {
  /** Its holder's token (random: only its holder knows it). */
  readonly token: string;
  /** The lease length its holder set, in ms. */
  readonly durationMs: number;
  /** Its holder's wall clock (`Date.now()`) when it sent the write. */
  readonly writtenAt: number;
  /** Its holder locker's `owner`. */
  readonly owner: string;
}

/**
 * The Memcached keys of one locker: its prefix before each caller's key, within the 250 bytes
 * Memcached allows together with the client's own namespace.
 */
export class KeyNames {
  /** The locker's prefix (without the client's namespace, which the client adds). */
  readonly prefix: string;
  /** The item whose presence says the server kept its items since a locker wrote it. */
  readonly epoch: string;
  /** The item that keeps every key of the prefix out for a lease after a restart was found. */
  readonly restarted: string;
  /** Bytes a plain key may take after the prefix (and the client's namespace). */
  readonly #room: number;
  /** The client's namespace: the whole key must not be `cas` (see {@link resourceOf}). */
  readonly #namespace: string;

  /**
   * @param prefix the locker's `prefix` (validated here).
   * @param namespace the client's `namespace` option, which the client puts before every key.
   */
  constructor(prefix: string, namespace: string) {
    if (!PLAIN.test(namespace)) {
      throw new InvalidArgumentError(
        "client.namespace",
        "printable ASCII without spaces or `$` (the namespace of a memcached client the locker can use)",
        namespace,
      );
    }
    const fixed = Buffer.byteLength(namespace) + prefix.length;
    if (!PLAIN.test(prefix) || fixed + HASHED_NAME_BYTES > MAX_MEMCACHED_KEY_BYTES) {
      throw new InvalidArgumentError(
        "options.prefix",
        `printable ASCII without spaces or \`$\`, at most ${MAX_MEMCACHED_KEY_BYTES - HASHED_NAME_BYTES} bytes with the client's namespace`,
        prefix,
      );
    }
    this.prefix = prefix;
    this.#namespace = namespace;
    this.#room = MAX_MEMCACHED_KEY_BYTES - fixed;
    this.epoch = `${prefix}${HASH_MARK}epoch`;
    this.restarted = `${prefix}${HASH_MARK}restarted`;
  }

  /**
   * The item of `key`: the prefix and the key itself when it is plain (printable ASCII but space
   * and `$`, not starting with `#`) and fits; otherwise the prefix, `#` and the key's SHA-256, so
   * that every valid Locker key has an item of its own. (Nor may the whole key be `cas`: the
   * client's `gets` answers `{ [key]: value, cas }`.)
   */
  resourceOf(key: string): string {
    if (key.length <= this.#room && PLAIN.test(key) && !key.startsWith(HASH_MARK)) {
      const resource = this.prefix + key;
      if (this.#namespace + resource !== "cas") return resource;
    }
    return `${this.prefix}${HASH_MARK}${createHash("sha256").update(key, "utf8").digest("base64url")}`;
  }

  /** The caller's key of a plain item (see {@link resourceOf}); `undefined` for a hashed one. */
  keyOf(resource: string): string | undefined {
    const key = resource.slice(this.prefix.length);
    return key.startsWith(HASH_MARK) ? undefined : key;
  }
}

/** The value of a lock item: its token, lease, the holder's wall clock now, and owner. */
export function lockValue(token: string, durationMs: number, owner: string): string {
  return `${VALUE_TAG} ${token} ${durationMs} ${Date.now()} ${encodeURIComponent(owner)}`;
}

/** A lock item's value read back, or `undefined` when it is not one (written by something else). */
export function parseLockValue(value: unknown): LockValue | undefined {
  if (typeof value !== "string") return undefined;
  const parts = value.split(" ");
  if (parts.length !== 5 || parts[0] !== VALUE_TAG) return undefined;
  const [, token = "", duration = "", written = "", owner = ""] = parts;
  const durationMs = Number(duration);
  const writtenAt = Number(written);
  if (token === "" || !Number.isFinite(durationMs) || !Number.isFinite(writtenAt)) return undefined;
  try {
    return { token, durationMs, writtenAt, owner: decodeURIComponent(owner) };
  } catch {
    return { token, durationMs, writtenAt, owner: "" };
  }
}

/**
 * The TTL, in whole seconds, that keeps an item for at least `durationMs`. Memcached counts time
 * in whole seconds on a clock that a one-second timer advances: an item stored with TTL `n`
 * lives more than `n - 1` seconds when the timer ticks on time, but only more than `n - 2` when a
 * tick crosses a second boundary late and the clock skips a second (about once every few hours,
 * as the tick drifts). Two seconds over the lease, then.
 */
export function ttlSecondsOf(durationMs: number): number {
  return Math.ceil(durationMs / 1000) + 2;
}

/**
 * The local deadline of a lease of `durationMs` set by a command sent at `sentAt`
 * (`performance.now()`): less 1% and 2 ms for this clock running faster than the server's (the
 * server keeps the item at least `durationMs`, see {@link ttlSecondsOf}).
 */
export function validUntilOf(sentAt: number, durationMs: number): number {
  return sentAt + durationMs - Math.round(durationMs * 0.01) - 2;
}
