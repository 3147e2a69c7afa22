import { ClientStoreReadWriteLocker } from "../lockers/client-store-lockers.js";
import type { ResolvedZooKeeperLockerOptions, ZooKeeperLockerOptions } from "./options.js";
import type { ZooKeeperClient } from "./types.js";
import { ZOOKEEPER_STORE } from "./zookeeper-locker.js";

/** The default `prefix` of a {@link ZooKeeperReadWriteLocker}: its keys never meet locks' keys. */
export const ZOOKEEPER_READ_WRITE_PREFIX = "/globallock-rw";

/**
 * Read-write locks on ZooKeeper (Curator's read-write lock): per key, many readers or one writer,
 * across every process using the same ensemble. `read` and `write` are {@link Locker}s on one
 * client's session (see {@link ZooKeeperLocker}). Readers and writers queue as ephemeral
 * sequential nodes under the key's node: a reader holds when no writer is ahead of it, a writer
 * when it is first. A reader watches the writer ahead of it, a writer the node just before its own:
 * readers queued before a writer get in together before it, readers arriving after a waiting writer
 * wait behind it, and a writer is never starved. Write leases can carry fencing tokens (the node's
 * czxid). Closing either view closes both.
 */
export class ZooKeeperReadWriteLocker extends ClientStoreReadWriteLocker<
  ZooKeeperClient,
  ResolvedZooKeeperLockerOptions
> {
  /**
   * @param client a `Client` of `node-zookeeper-client`, created, connected, owned and closed by the caller.
   * @param options the locker's options (see {@link ZooKeeperLockerOptions}; default prefix `"/globallock-rw"`).
   */
  constructor(client: ZooKeeperClient, options?: ZooKeeperLockerOptions) {
    super(ZOOKEEPER_STORE, client, options, ZOOKEEPER_READ_WRITE_PREFIX);
  }
}
