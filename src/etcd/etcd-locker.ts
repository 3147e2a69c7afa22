import { checkEtcd } from "../deployment/etcd.js";
import { InvalidArgumentError } from "../errors.js";
import { type ClientStore, ClientStoreLocker } from "../lockers/client-store-lockers.js";
import { etcdBackend } from "./etcd-backend.js";
import { type EtcdLockerOptions, type ResolvedEtcdLockerOptions, resolveEtcdOptions } from "./options.js";
import type { EtcdClient } from "./types.js";

/** Checks the client argument of an etcd locker. */
function checkClient(client: unknown): void {
  const candidate = client as Partial<EtcdClient> | null | undefined;
  if (
    typeof candidate?.lease !== "function" ||
    typeof candidate.watch !== "function" ||
    typeof candidate.kv?.txn !== "function" ||
    !Buffer.isBuffer(candidate.prefix)
  ) {
    throw new InvalidArgumentError("client", "an Etcd3 client of the etcd3 package", client);
  }
}

/** etcd, as its locker, semaphore and read-write locker are made from it. */
export const ETCD_STORE: ClientStore<EtcdClient, ResolvedEtcdLockerOptions> = {
  name: "etcd",
  checkClient,
  resolve: resolveEtcdOptions,
  backend: etcdBackend,
  checkDeployment: checkEtcd,
};

/**
 * A {@link Locker} on etcd, through an `Etcd3` client (npm `etcd3`) the caller creates, owns and
 * closes: locks that survive a leader failover, with fencing tokens that stay monotonic across it.
 *
 * - **Leases.** The locker grants one etcd lease (TTL: `expiry` rounded up to whole seconds) on
 *   its first acquisition and keeps it alive while it holds locks: every lease extension is one
 *   keepalive, shared by every lock on it. Acquisitions with their own `expiry` get a lease of
 *   their own length. If etcd loses the lease (expired while this process was stopped, revoked),
 *   every lock on it is lost at once: each `lost` aborts and `onLockLost` is called.
 * - **A key deleted under its holder.** A holder watches its key's directory (the watch its
 *   waiters share; a lock opens its own once held for 100 ms): its key deleted — by hand, or with
 *   every key of its lease by a `leaseRevoke` — is a loss (`"expired"`) as soon as etcd says so,
 *   not at the next keepalive (which would not notice a key deleted by hand at all).
 * - **Keys.** A holder is an etcd key `<prefix><bytes>:<key>/<slot>` attached to the lease, its
 *   value the lease's token, weight and `owner`. A `lock` starts watching the key's directory and
 *   sends one transaction that puts its entry and reads the directory (uncontended, that is all);
 *   `tryLock` puts one only into an empty directory, so a failed `tryLock` leaves nothing behind.
 * - **Waiting.** etcd's own lock recipe: a waiter's entry stays in the key's directory, on the
 *   locker's lease, and holds once every entry created before it is gone, so waiters are served in
 *   arrival order across processes. A waiter watches the directory for deletes (a release, or the
 *   entries of a lease that expired) and reads where its entry stands — a read, not a write; a
 *   waiter that gives up deletes its entry. A jittered backoff is the safety net.
 * - **Fencing.** `acquire(…, { fencing: true })` returns the entry's create revision: etcd orders
 *   revisions through raft, so tokens keep rising across a leader failover (and across a restart
 *   of every member).
 * - **Hand-off.** `handOff`/`adopt` work: adopting puts the same etcd key again with a new token on
 *   the adopter's lease, so the fencing token stays the same.
 * - **Close.** `close()` rejects waiters and stops keepalives; it does not delete held locks (they
 *   are freed when the lease expires, at most `expiry` rounded up to seconds later; releases still
 *   work) and revokes a lease that carries none. It never closes the caller's client.
 */
export class EtcdLocker extends ClientStoreLocker<EtcdClient, ResolvedEtcdLockerOptions> {
  /**
   * @param client an `Etcd3` client (a namespaced one works too), created, owned and closed by the caller.
   * @param options see {@link EtcdLockerOptions}.
   */
  constructor(client: EtcdClient, options?: EtcdLockerOptions) {
    super(ETCD_STORE, client, options);
  }
}
