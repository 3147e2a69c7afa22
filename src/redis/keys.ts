/**
 * Names of the Redis keys that accompany a lock key. A script may only touch keys of one Cluster
 * slot, so companions share the lock key's hash tag: its own `{tag}` when it has one, else the
 * whole lock key as the tag.
 */

/** The cluster hash tag of `key` (the part between the first `{` and the next `}`), if any. */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf("{");
  if (open < 0) return undefined;
  const close = key.indexOf("}", open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/**
 * The key `suffix` that accompanies lock key `resource`, in the same Cluster slot; `undefined`
 * when no such name exists (a key with a `}` but no hash tag) and the slot matters (a Cluster).
 */
export function companionKey(resource: string, suffix: string, cluster: boolean): string | undefined {
  if (hashTagOf(resource) !== undefined) return `${resource}:${suffix}`;
  if (!resource.includes("}")) return `{${resource}}:${suffix}`;
  return cluster ? undefined : `${resource}:${suffix}`;
}
