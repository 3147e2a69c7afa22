import type { Etcd3 } from "etcd3";
import {
  EtcdLocker,
  type EtcdLockerOptions,
  EtcdReadWriteLocker,
  EtcdSemaphore,
  type Locker,
  type ReadWriteLocker,
} from "../../src/index.js";
import { EtcdCluster } from "../../support/etcd-server.mjs";
import type { LockerHarness } from "../contracts/contract.js";
import type { ReadWriteHarness } from "../contracts/read-write-contract.js";
import type { SemaphoreHarness } from "../contracts/semaphore-contract.js";

export { EtcdCluster } from "../../support/etcd-server.mjs";

/** A short lease for the suites (whole seconds, as etcd counts them; its timeout is 750 ms). */
const EXPIRY = 3000;

/** Lockers on one real etcd cluster, each on its own client (like separate processes). */
export class EtcdFixture {
  readonly cluster: EtcdCluster;
  readonly clients: Etcd3[] = [];
  readonly closables: Array<{ close(): Promise<void> }> = [];

  constructor(cluster: EtcdCluster) {
    this.cluster = cluster;
  }

  static async start(members = 1): Promise<EtcdFixture> {
    return new EtcdFixture(await EtcdCluster.start({ members }));
  }

  /** A new client on the cluster (closed by `stop`). */
  client(): Etcd3 {
    const client = this.cluster.client();
    this.clients.push(client);
    return client;
  }

  /** A new locker on a new client. */
  locker(options?: EtcdLockerOptions, client: Etcd3 = this.client()): EtcdLocker {
    const locker = new EtcdLocker(client, { expiry: EXPIRY, ...options });
    this.closables.push(locker);
    return locker;
  }

  /** A new semaphore on a new client. */
  semaphore(limit: number, options?: EtcdLockerOptions, client: Etcd3 = this.client()): EtcdSemaphore {
    const semaphore = new EtcdSemaphore(client, { expiry: EXPIRY, ...options, limit });
    this.closables.push(semaphore);
    return semaphore;
  }

  /** A new read-write locker on a new client. */
  readWrite(options?: EtcdLockerOptions, client: Etcd3 = this.client()): EtcdReadWriteLocker {
    const rw = new EtcdReadWriteLocker(client, { expiry: EXPIRY, ...options });
    this.closables.push(rw);
    return rw;
  }

  /** Closes lockers and clients, stops the cluster. */
  async stop(): Promise<void> {
    await Promise.allSettled(this.closables.map((closable) => closable.close()));
    for (const client of this.clients) client.close();
    await this.cluster.stop();
  }

  #options(options?: { wakeOnly?: boolean }): EtcdLockerOptions {
    return options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 }, expiry: 60_000 } : {};
  }

  /** The lock contract harness. */
  harness(): LockerHarness {
    return {
      create: async (options) => this.locker(this.#options(options)),
      peer: async (_locker, options) => this.locker(this.#options(options)),
      fencing: true,
      handOff: true,
      cleanup: () => this.stop(),
    };
  }

  /** The semaphore contract harness. */
  semaphoreHarness(): SemaphoreHarness {
    const limits = new WeakMap<Locker, number>();
    return {
      create: async ({ limit, wakeOnly }) => {
        const semaphore = this.semaphore(limit, this.#options({ wakeOnly: wakeOnly === true }));
        limits.set(semaphore, limit);
        return semaphore;
      },
      peer: async (locker, options) => {
        const limit = limits.get(locker) ?? 1;
        const semaphore = this.semaphore(limit, this.#options(options));
        limits.set(semaphore, limit);
        return semaphore;
      },
      expires: true,
      cleanup: () => this.stop(),
    };
  }

  /** The read-write contract harness. */
  readWriteHarness(): ReadWriteHarness {
    return {
      create: async (options): Promise<ReadWriteLocker> => this.readWrite(this.#options(options)),
      peer: async (_rw, options): Promise<ReadWriteLocker> => this.readWrite(this.#options(options)),
      fencing: true,
      cleanup: () => this.stop(),
    };
  }
}
