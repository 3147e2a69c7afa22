import { ClientStoreSemaphore } from "../lockers/client-store-lockers.js";
import { ETCD_STORE } from "./etcd-locker.js";
import type { EtcdLockerOptions, ResolvedEtcdLockerOptions } from "./options.js";
import type { EtcdClient } from "./types.js";

/** Options of {@link EtcdSemaphore}: the locker's options plus the number of permits per key. */
export interface EtcdSemaphoreOptions extends EtcdLockerOptions {
  /**
   * Permits per key (required): a positive safe integer. Every semaphore using a key must pass
   * the same limit (etcd does not store it).
   */
  limit: number;
}

/** The default `prefix` of an {@link EtcdSemaphore}: its keys never meet locks' keys. */
export const ETCD_SEMAPHORE_PREFIX = "globallock:semaphore:";

/**
 * A counting semaphore on etcd: at most `limit` permits of a key are held at once, across every
 * process using the same etcd cluster (see {@link EtcdLocker} for leases, fencing and close).
 *
 * - Holders and waiters are etcd keys in the key's directory, attached to their locker's lease,
 *   in create-revision order: an entry holds when the weights of the entries created before it
 *   plus its own fit the limit. So waiters are served strictly in arrival order across processes,
 *   and a heavy waiter is never overtaken by lighter ones that came after it.
 * - A waiter's entry lives on its locker's lease (kept alive while it waits); it is deleted when
 *   the waiter gives up, and freed with the lease if its process dies.
 * - `fencing: true` is an UnsupportedError unless `limit` is 1.
 */
export class EtcdSemaphore extends ClientStoreSemaphore<EtcdClient, ResolvedEtcdLockerOptions> {
  /**
   * @param client an `Etcd3` client, created, owned and closed by the caller.
   * @param options the locker's options (default prefix {@link ETCD_SEMAPHORE_PREFIX}) and `limit`.
   */
  constructor(client: EtcdClient, options: EtcdSemaphoreOptions) {
    super(ETCD_STORE, client, options, ETCD_SEMAPHORE_PREFIX);
  }
}
