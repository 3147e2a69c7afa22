import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkEtcd } from "../deployment/etcd.js";
import { InvalidArgumentError } from "../errors.js";
import { validateOptionsObject } from "../internal/validate.js";
import { CoreSemaphore } from "../lockers/core-semaphore.js";
import { etcdBackend } from "./etcd-backend.js";
import { checkClient } from "./etcd-locker.js";
import { type EtcdLockerOptions, type ResolvedEtcdLockerOptions, resolveEtcdOptions } from "./options.js";
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
export class EtcdSemaphore extends CoreSemaphore<ResolvedEtcdLockerOptions> {
  /**
   * @param client an `Etcd3` client, created, owned and closed by the caller.
   * @param options the locker's options (default prefix {@link ETCD_SEMAPHORE_PREFIX}) and `limit`.
   */
  constructor(client: EtcdClient, options: EtcdSemaphoreOptions) {
    checkClient(client);
    validateOptionsObject("options", options);
    const { limit, ...rest } = (options ?? {}) as Partial<EtcdSemaphoreOptions>;
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1) {
      throw new InvalidArgumentError("options.limit", "a safe integer >= 1 (permits per key)", limit);
    }
    const given: EtcdLockerOptions = { ...rest };
    if (given.prefix === undefined) given.prefix = ETCD_SEMAPHORE_PREFIX;
    const resolved = resolveEtcdOptions(given);
    super(resolved, etcdBackend(client, resolved, limit), limit, "etcd-semaphore");
    attachDeploymentCheck([this], () => checkEtcd(client));
  }

  /** @internal */
  protected fencingRefusal(): string {
    return `Fencing tokens need an exclusive grant; a semaphore with limit ${this.limit} shares its permits`;
  }
}
