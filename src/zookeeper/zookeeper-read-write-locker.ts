import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkZooKeeper } from "../deployment/zookeeper.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS, type ReadWriteStore } from "../lockers/read-write-views.js";
import { resolveZooKeeperOptions, type ZooKeeperLockerOptions } from "./options.js";
import type { ZooKeeperClient } from "./types.js";
import { zooKeeperBackend } from "./zookeeper-backend.js";
import { checkClient } from "./zookeeper-locker.js";

/** The default `prefix` of a {@link ZooKeeperReadWriteLocker}: its keys never meet locks' keys. */
export const ZOOKEEPER_READ_WRITE_PREFIX = "/globallock-rw";

/** ZooKeeper's read-write views (diagnostics kinds `zookeeper-read`, `zookeeper-write`). */
const ZOOKEEPER: ReadWriteStore = { name: "zookeeper", permits: READ_WRITE_PERMITS };

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
export class ZooKeeperReadWriteLocker extends CoreReadWriteLocker {
  /**
   * @param client a `Client` of `node-zookeeper-client`, created, connected, owned and closed by the caller.
   * @param options the locker's options (see {@link ZooKeeperLockerOptions}; default prefix `"/globallock-rw"`).
   */
  constructor(client: ZooKeeperClient, options?: ZooKeeperLockerOptions) {
    checkClient(client);
    const resolved = resolveZooKeeperOptions(options, ZOOKEEPER_READ_WRITE_PREFIX);
    super(resolved, zooKeeperBackend(client, resolved, READ_WRITE_PERMITS), ZOOKEEPER);
    attachDeploymentCheck([this, this.read, this.write], () => checkZooKeeper(client));
  }
}
