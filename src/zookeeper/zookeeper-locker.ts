import { checkZooKeeper } from "../deployment/zookeeper.js";
import { InvalidArgumentError } from "../errors.js";
import { type ClientStore, ClientStoreLocker } from "../lockers/client-store-lockers.js";
import {
  type ResolvedZooKeeperLockerOptions,
  resolveZooKeeperOptions,
  type ZooKeeperLockerOptions,
} from "./options.js";
import type { ZooKeeperClient } from "./types.js";
import { zooKeeperBackend } from "./zookeeper-backend.js";

/** Checks the client argument of a ZooKeeper locker. */
function checkClient(client: unknown): void {
  const candidate = client as Partial<ZooKeeperClient> | null | undefined;
  const methods = ["create", "remove", "exists", "getChildren", "getData", "getSessionTimeout", "on"] as const;
  if (
    candidate === null ||
    typeof candidate !== "object" ||
    methods.some((name) => typeof candidate[name] !== "function")
  ) {
    throw new InvalidArgumentError("client", "a Client of the node-zookeeper-client package", client);
  }
}

/** ZooKeeper, as its locker, semaphore and read-write locker are made from it. */
export const ZOOKEEPER_STORE: ClientStore<ZooKeeperClient, ResolvedZooKeeperLockerOptions> = {
  name: "zookeeper",
  checkClient,
  resolve: resolveZooKeeperOptions,
  backend: zooKeeperBackend,
  checkDeployment: checkZooKeeper,
};

/**
 * A {@link Locker} on ZooKeeper, through a `Client` of `node-zookeeper-client` that the caller
 * creates, connects, owns and closes (the locker never closes it): Curator's lock recipe.
 *
 * - **Nodes.** A key is a persistent node `<prefix>/<key>` (the key as a readable node name: "%",
 *   "/" and the characters ZooKeeper refuses are escaped), made on demand, kept while the key is
 *   in use here, and deleted once idle for 2 s or when the locker closes. Every holder and every queued waiter is an ephemeral sequential
 *   node under it, its data the locker's `owner`. The lowest node holds; a waiter watches only the
 *   node just before its own (no herd), and is woken by its delete. `lock` creates its node and
 *   reads the key's children in one round trip (uncontended, that is all); a `tryLock` that
 *   misses deletes its node again, so it leaves nothing behind.
 * - **Leases.** A lease lives as long as the client's session: ZooKeeper deletes a session's nodes
 *   when it has not heard from it for the session timeout (a holder that died or stopped is freed
 *   then). A lease's extension is one `exists` of its node, which confirms the session and the node
 *   (a node deleted by hand is lost, `"taken"`); when the session expires, every lease on it is
 *   lost at once (`"expired"`). `expiry` must not exceed the session timeout (an attempt with a
 *   longer lease is an InvalidArgumentError): a holder cut off from ZooKeeper stops trusting its
 *   lease before its session can expire.
 * - **Fencing.** `acquire(…, { fencing: true })` returns the holder node's czxid: zxids are
 *   ordered by the leader and carry its epoch, so tokens keep rising across leader changes.
 * - **No hand-off.** A node belongs to its session: `handOff`/`adopt` are UnsupportedErrors.
 * - **Close.** `close()` rejects waiters and deletes their nodes. Held nodes stay until their
 *   lease runs out, as a dead holder's would, and are deleted then (the session lives on);
 *   releases still work.
 */
export class ZooKeeperLocker extends ClientStoreLocker<ZooKeeperClient, ResolvedZooKeeperLockerOptions> {
  /**
   * @param client a `Client` of `node-zookeeper-client`, created, connected, owned and closed by the caller.
   * @param options see {@link ZooKeeperLockerOptions}.
   */
  constructor(client: ZooKeeperClient, options?: ZooKeeperLockerOptions) {
    super(ZOOKEEPER_STORE, client, options);
  }
}
