import { UnsupportedError } from "../errors.js";
import type { RedisClient } from "./types.js";

/**
 * How long a fencing counter outlives its last grant, in ms. Losing the counter is harmless (the
 * next token starts from the server's clock, which is past every earlier token), so it need not
 * live forever and never piles up.
 */
export const FENCING_COUNTER_TTL_MS = 60 * 60 * 1000;

/** The cluster hash tag of `key` (the part between the first `{` and the next `}`), if any. */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf("{");
  if (open < 0) return undefined;
  const close = key.indexOf("}", open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/**
 * The key of the fencing counter of lock key `resource`, in the same Cluster slot: with the
 * resource's own hash tag when it has one, else with the whole resource as the tag.
 */
export function fencingCounterKey(resource: string, client: RedisClient): string {
  if (hashTagOf(resource) !== undefined) return `${resource}:fence`;
  if (!resource.includes("}")) return `{${resource}}:fence`;
  if (client.isCluster) {
    throw new UnsupportedError(
      `Fencing on a Redis Cluster needs a key without "}" or with a {hash tag}; received "${resource}"`,
    );
  }
  return `${resource}:fence`;
}
