import { ClientStoreReadWriteLocker } from "../lockers/client-store-lockers.js";
import { ETCD_STORE } from "./etcd-locker.js";
import type { EtcdLockerOptions, ResolvedEtcdLockerOptions } from "./options.js";
import type { EtcdClient } from "./types.js";

/** The default `prefix` of an {@link EtcdReadWriteLocker}: its keys never meet locks' keys. */
export const ETCD_READ_WRITE_PREFIX = "globallock:rw:";

/**
 * Read-write locks on etcd: per key, many readers or one writer, across every process using the
 * same etcd cluster. `read` and `write` are {@link Locker}s sharing one lease (see
 * {@link EtcdLocker}). A reader's entry weighs one permit, a writer's all of them, in one queue
 * ordered by create revision (see {@link EtcdSemaphore}): readers queued before a writer get in
 * together before it, readers arriving after a waiting writer wait behind it, and a writer is
 * never starved. Write leases can carry fencing tokens. Closing either view closes both.
 */
export class EtcdReadWriteLocker extends ClientStoreReadWriteLocker<EtcdClient, ResolvedEtcdLockerOptions> {
  /**
   * @param client an `Etcd3` client, created, owned and closed by the caller.
   * @param options the locker's options (see {@link EtcdLockerOptions}; default prefix `"globallock:rw:"`).
   */
  constructor(client: EtcdClient, options?: EtcdLockerOptions) {
    super(ETCD_STORE, client, options, ETCD_READ_WRITE_PREFIX);
  }
}
