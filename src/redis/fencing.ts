import { UnsupportedError } from "../errors.js";
import { companionKey } from "./keys.js";

/**
 * How long a fencing counter outlives its last grant, in ms. Losing the counter is harmless (the
 * next token starts from the server's clock, which is past every earlier token), so it need not
 * live forever and never piles up.
 */
export const FENCING_COUNTER_TTL_MS = 60 * 60 * 1000;

/** The key of the fencing counter of lock key `resource`, in the same Cluster slot. */
export function fencingCounterKey(resource: string, cluster: boolean): string {
  const key = companionKey(resource, "fence", cluster);
  if (key === undefined) {
    throw new UnsupportedError(
      `Fencing on a Redis Cluster needs a key without "}" or with a {hash tag}; received "${resource}"`,
    );
  }
  return key;
}
