/**
 * Redis tokens that carry their holder's owner: `<encodeURIComponent(owner)>/<32 hex random>`,
 * and `.<weight>` after it for a holder of several permits. The owner rides in the value every
 * store already writes (a lock key's value, a permit set's member), so storing it costs no
 * command; `inspect` reads it back.
 *
 * The separator is `/`: encodeURIComponent escapes it (and `:` and spaces, which grant messages
 * and batched extensions use as separators), so the first `/` ends the owner. The owner comes
 * before the random part, so the weight suffix (`%.(%d+)$` in permit-scripts.ts) can only be
 * found at the end: the random part has no `.`.
 */
import { newToken } from "../internal/token.js";

/**
 * The part of every token of a store whose locker is `owner`: computed once per store. Tokens
 * are then this prefix plus {@link newToken}'s random part.
 */
export function ownerTokenPrefix(owner: string): string {
  return `${encodeURIComponent(owner)}/`;
}

/** A fresh token: `prefix` (see {@link ownerTokenPrefix}), the random part, and the weight when > 1. */
export function ownedToken(prefix: string, weight: number): string {
  return weight === 1 ? prefix + newToken() : `${prefix}${newToken()}.${weight}`;
}

/** The owner a token carries; `""` when it carries none (a token written by an older version). */
export function ownerOfToken(token: string): string {
  const separator = token.indexOf("/");
  if (separator < 0) return "";
  try {
    return decodeURIComponent(token.slice(0, separator));
  } catch {
    return "";
  }
}

/** The permits a holder's token (a permit set's member) takes: its `.<weight>` suffix, else 1. */
export function weightOfToken(token: string): number {
  const match = /\.(\d+)$/.exec(token);
  return match === null ? 1 : Number(match[1]);
}
