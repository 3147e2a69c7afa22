import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkEtcd } from "../deployment/etcd.js";
import { validateOptionsObject } from "../internal/validate.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS, type ReadWriteStore } from "../lockers/read-write-views.js";
import { etcdBackend } from "./etcd-backend.js";
import { checkClient } from "./etcd-locker.js";
import { type EtcdLockerOptions, resolveEtcdOptions } from "./options.js";
import type { EtcdClient } from "./types.js";

/** The default `prefix` of an {@link EtcdReadWriteLocker}: its keys never meet locks' keys. */
export const ETCD_READ_WRITE_PREFIX = "globallock:rw:";

/** etcd's read-write views. */
const ETCD: ReadWriteStore = { name: "etcd", permits: READ_WRITE_PERMITS };

/**
 * Read-write locks on etcd: per key, many readers or one writer, across every process using the
 * same etcd cluster. `read` and `write` are {@link Locker}s sharing one lease (see
 * {@link EtcdLocker}). A reader's entry weighs one permit, a writer's all of them, in one queue
 * ordered by create revision (see {@link EtcdSemaphore}): readers queued before a writer get in
 * together before it, readers arriving after a waiting writer wait behind it, and a writer is
 * never starved. Write leases can carry fencing tokens. Closing either view closes both.
 */
export class EtcdReadWriteLocker extends CoreReadWriteLocker {
  /**
   * @param client an `Etcd3` client, created, owned and closed by the caller.
   * @param options the locker's options (see {@link EtcdLockerOptions}; default prefix `"globallock:rw:"`).
   */
  constructor(client: EtcdClient, options?: EtcdLockerOptions) {
    checkClient(client);
    validateOptionsObject("options", options);
    const given: EtcdLockerOptions = { ...options };
    if (given.prefix === undefined) given.prefix = ETCD_READ_WRITE_PREFIX;
    const resolved = resolveEtcdOptions(given);
    super(resolved, etcdBackend(client, resolved, READ_WRITE_PERMITS), ETCD);
    attachDeploymentCheck([this, this.read, this.write], () => checkEtcd(client));
  }
}
