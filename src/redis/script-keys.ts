import { fencingCounterKey } from "./fencing.js";
import { companionKey } from "./keys.js";

/** The KEYS of one resource's scripts on one node or Cluster. */
export interface KeySet {
  readonly plain: readonly string[];
  /** Lock, grant queue and liveness hash; undefined when the key cannot have companions. */
  readonly queued: readonly string[] | undefined;
  /** `queued` plus the fencing counter, built on first use. */
  fenced: readonly string[] | undefined;
}

/** Resources whose KEYS arrays a store keeps. */
const KEY_CACHE_SIZE = 1024;

/**
 * The KEYS arrays of resources' scripts, built once and cached (at most {@link KEY_CACHE_SIZE}
 * resources; the cache starts afresh when full): a key used again is found, not named again. The
 * arrays are shared: never mutate them.
 */
export class ScriptKeys {
  readonly #cluster: boolean;
  readonly #cache = new Map<string, KeySet>();

  /** @param cluster keys of a Cluster: companions must share the lock key's slot. */
  constructor(cluster: boolean) {
    this.#cluster = cluster;
  }

  /** The KEYS arrays of `resource`. */
  of(resource: string): KeySet {
    let keySet = this.#cache.get(resource);
    if (keySet === undefined) {
      const queue = companionKey(resource, "queue", this.#cluster);
      const liveness = companionKey(resource, "waiters", this.#cluster);
      keySet = {
        plain: [resource],
        queued: queue === undefined || liveness === undefined ? undefined : [resource, queue, liveness],
        fenced: undefined,
      };
      if (this.#cache.size >= KEY_CACHE_SIZE) this.#cache.clear();
      this.#cache.set(resource, keySet);
    }
    return keySet;
  }

  /** `keySet`'s queued keys and the fencing counter (a key with companions only). */
  fenced(keySet: KeySet): readonly string[] {
    const queued = keySet.queued as readonly string[];
    keySet.fenced ??= [...queued, fencingCounterKey(queued[0] as string, this.#cluster)];
    return keySet.fenced;
  }
}
