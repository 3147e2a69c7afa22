import { ClientStoreSemaphore } from "../lockers/client-store-lockers.js";
import type { ResolvedZooKeeperLockerOptions, ZooKeeperLockerOptions } from "./options.js";
import type { ZooKeeperClient } from "./types.js";
import { ZOOKEEPER_STORE } from "./zookeeper-locker.js";

/** Options of {@link ZooKeeperSemaphore}: the locker's options plus the number of permits per key. */
export interface ZooKeeperSemaphoreOptions extends ZooKeeperLockerOptions {
  /**
   * Permits per key (required): a positive safe integer. Every semaphore using a key must pass
   * the same limit (ZooKeeper does not store it).
   */
  limit: number;
}

/** The default `prefix` of a {@link ZooKeeperSemaphore}: its keys never meet locks' keys. */
export const ZOOKEEPER_SEMAPHORE_PREFIX = "/globallock-semaphores";

/**
 * A counting semaphore on ZooKeeper: at most `limit` permits of a key are held at once, across
 * every process using the same ensemble (see {@link ZooKeeperLocker} for nodes, leases and close).
 *
 * - Holders and waiters are ephemeral sequential nodes under the key's node, each named with the
 *   permits it takes; in sequence order, a node holds when the permits of the nodes ahead of it
 *   plus its own fit the limit. So waiters are served strictly in arrival order across processes,
 *   and a heavy waiter is never overtaken by lighter ones that came after it.
 * - A waiter watches only the fewest nodes ahead of it that keep it out (the nearest for a
 *   limit-1 key), so a release wakes the waiters it can let in, not every waiter.
 * - `fencing: true` is an UnsupportedError unless `limit` is 1.
 */
export class ZooKeeperSemaphore extends ClientStoreSemaphore<ZooKeeperClient, ResolvedZooKeeperLockerOptions> {
  /**
   * @param client a `Client` of `node-zookeeper-client`, created, connected, owned and closed by the caller.
   * @param options the locker's options (default prefix {@link ZOOKEEPER_SEMAPHORE_PREFIX}) and `limit`.
   */
  constructor(client: ZooKeeperClient, options: ZooKeeperSemaphoreOptions) {
    super(ZOOKEEPER_STORE, client, options, ZOOKEEPER_SEMAPHORE_PREFIX);
  }
}
