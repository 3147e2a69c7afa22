import type { BackendFactory } from "../backend.js";
import { type CoreSettings, LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import type { Finding } from "../deployment/finding.js";
import type { LockerStore } from "../diagnostics.js";
import { semaphoreFencingRefusal } from "../sql/semaphore-options.js";
import { CoreLocker } from "./core-locker.js";
import { CoreSemaphore } from "./core-semaphore.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS } from "./read-write-views.js";
import { splitSemaphoreOptions } from "./semaphore-options.js";

/**
 * A store reached through one client that the caller creates, owns and closes (no locker closes
 * it), whose backend counts permits per key: etcd, ZooKeeper. Its locker, semaphore and read-write
 * locker are made the same way from it — check the client, resolve the options, make the backend
 * for the permits of a key, give the deployment check — by {@link ClientStoreLocker},
 * {@link ClientStoreSemaphore} and {@link ClientStoreReadWriteLocker}.
 */
export interface ClientStore<Client, Resolved extends CoreSettings> {
  /** The store's name in diagnostics kinds (`"<name>-lock"`, `"<name>-semaphore"`, `"<name>-read"`…). */
  readonly name: LockerStore;
  /** Throws an InvalidArgumentError naming `client` unless it is a client of the store. */
  readonly checkClient: (client: unknown) => void;
  /**
   * Validates a locker's options and fills in the defaults, `prefix` defaulting to `defaultPrefix`
   * (undefined: the default of the store's locker). Throws InvalidArgumentError.
   */
  readonly resolve: (options: unknown, defaultPrefix?: string) => Resolved;
  /** Makes the backend of a locker on `client` counting `limit` permits per key (1 for a lock). */
  readonly backend: (client: Client, options: Resolved, limit: number) => BackendFactory;
  /** The deployment check of the store `client` reaches (see `checkDeployment`). */
  readonly checkDeployment: (client: Client) => Promise<Finding[]>;
}

/** The locker of a {@link ClientStore}: a store's locker class extends it with its constructor. */
export abstract class ClientStoreLocker<Client, Resolved extends CoreSettings> extends CoreLocker<Resolved> {
  /**
   * @param store the store.
   * @param client the caller's client (checked here).
   * @param options the caller's options bag.
   */
  protected constructor(store: ClientStore<Client, Resolved>, client: Client, options: unknown) {
    store.checkClient(client);
    const resolved = store.resolve(options);
    super(new LockCore(resolved, store.backend(client, resolved, 1)), `${store.name}-lock`);
    attachDeploymentCheck([this], () => store.checkDeployment(client));
  }
}

/**
 * The semaphore of a {@link ClientStore} (options: the locker's plus the required `limit`): a
 * store's semaphore class extends it with its constructor.
 */
export abstract class ClientStoreSemaphore<Client, Resolved extends CoreSettings> extends CoreSemaphore<Resolved> {
  /**
   * @param store the store.
   * @param client the caller's client (checked here).
   * @param options the caller's options bag, with its `limit`.
   * @param defaultPrefix the `prefix` when the options give none.
   */
  protected constructor(store: ClientStore<Client, Resolved>, client: Client, options: unknown, defaultPrefix: string) {
    store.checkClient(client);
    const { limit, rest } = splitSemaphoreOptions(options);
    const resolved = store.resolve(rest, defaultPrefix);
    super(resolved, store.backend(client, resolved, limit), limit, `${store.name}-semaphore`);
    attachDeploymentCheck([this], () => store.checkDeployment(client));
  }

  /** @internal */
  protected fencingRefusal(): string {
    return semaphoreFencingRefusal(this.limit);
  }
}

/**
 * The read-write locker of a {@link ClientStore}: both views on one backend counting
 * {@link READ_WRITE_PERMITS} per key. A store's read-write locker class extends it with its
 * constructor.
 */
export abstract class ClientStoreReadWriteLocker<
  Client,
  Resolved extends CoreSettings,
> extends CoreReadWriteLocker<Resolved> {
  /**
   * @param store the store.
   * @param client the caller's client (checked here).
   * @param options the caller's options bag.
   * @param defaultPrefix the `prefix` when the options give none.
   */
  protected constructor(store: ClientStore<Client, Resolved>, client: Client, options: unknown, defaultPrefix: string) {
    store.checkClient(client);
    const resolved = store.resolve(options, defaultPrefix);
    const views = { name: store.name, permits: READ_WRITE_PERMITS };
    super(resolved, store.backend(client, resolved, READ_WRITE_PERMITS), views);
    attachDeploymentCheck([this, this.read, this.write], () => store.checkDeployment(client));
  }
}
