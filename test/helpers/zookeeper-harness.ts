import type { Client } from "node-zookeeper-client";
import type { Locker, ReadWriteLocker } from "../../src/index.js";
import type { ZooKeeperLockerOptions } from "../../src/zookeeper/options.js";
import { ZooKeeperLocker } from "../../src/zookeeper/zookeeper-locker.js";
import { ZooKeeperReadWriteLocker } from "../../src/zookeeper/zookeeper-read-write-locker.js";
import { ZooKeeperSemaphore } from "../../src/zookeeper/zookeeper-semaphore.js";
import { ZooKeeperEnsemble } from "../../support/zookeeper-server.mjs";
import type { LockerHarness } from "../contracts/contract.js";
import type { ReadWriteHarness } from "../contracts/read-write-contract.js";
import type { SemaphoreHarness } from "../contracts/semaphore-contract.js";

export { fourLetterWord, ZooKeeperEnsemble } from "../../support/zookeeper-server.mjs";

/** The suites' session timeout: long enough that a loaded machine never loses a session. */
const SESSION_MS = 30_000;

/** A short lease for the suites (its operation timeout is 750 ms). */
const EXPIRY = 3000;

/** What a locker of the fixture is made with. */
export interface ZooKeeperFixtureOptions extends ZooKeeperLockerOptions {
  /** The session timeout of its new client, in ms (default 30 000). */
  readonly sessionTimeout?: number;
}

/** Lockers on one real ZooKeeper ensemble, each on its own client (its own session: like separate processes). */
export class ZooKeeperFixture {
  readonly ensemble: ZooKeeperEnsemble;
  readonly clients: Client[] = [];
  readonly closables: Array<{ close(): Promise<void> }> = [];

  constructor(ensemble: ZooKeeperEnsemble) {
    this.ensemble = ensemble;
  }

  static async start(members = 1): Promise<ZooKeeperFixture> {
    return new ZooKeeperFixture(await ZooKeeperEnsemble.start({ members }));
  }

  /** A new client on the ensemble, connecting (closed by `stop`). */
  client(sessionTimeout = SESSION_MS): Client {
    const client = this.ensemble.client({ sessionTimeout });
    this.clients.push(client);
    return client;
  }

  /** A new locker on a new client. */
  locker(options: ZooKeeperFixtureOptions = {}): ZooKeeperLocker {
    const { sessionTimeout, ...rest } = options;
    const locker = new ZooKeeperLocker(this.client(sessionTimeout), { expiry: EXPIRY, ...rest });
    this.closables.push(locker);
    return locker;
  }

  /** A new semaphore on a new client. */
  semaphore(limit: number, options: ZooKeeperFixtureOptions = {}): ZooKeeperSemaphore {
    const { sessionTimeout, ...rest } = options;
    const semaphore = new ZooKeeperSemaphore(this.client(sessionTimeout), { expiry: EXPIRY, ...rest, limit });
    this.closables.push(semaphore);
    return semaphore;
  }

  /** A new read-write locker on a new client. */
  readWrite(options: ZooKeeperFixtureOptions = {}): ZooKeeperReadWriteLocker {
    const { sessionTimeout, ...rest } = options;
    const rw = new ZooKeeperReadWriteLocker(this.client(sessionTimeout), { expiry: EXPIRY, ...rest });
    this.closables.push(rw);
    return rw;
  }

  /**
   * Closes lockers and clients, stops the ensemble. A client is closed once connected (or given
   * up on): `node-zookeeper-client` 1.1.3 closed while connecting reads the server's connect answer
   * as a reply and throws from its socket handler (an uncaught "Unknown code").
   */
  async stop(): Promise<void> {
    await Promise.allSettled(this.closables.map((closable) => closable.close()));
    await Promise.all(this.clients.map((client) => connectedOrGivenUp(client)));
    for (const client of this.clients) client.close();
    await this.ensemble.stop();
  }

  /** A wakeOnly locker's options: only a release's watch can wake its waiters within the suites' waits. */
  #options(options?: { wakeOnly?: boolean }): ZooKeeperLockerOptions {
    return options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 }, expiry: SESSION_MS } : {};
  }

  /** The lock contract harness. */
  harness(): LockerHarness {
    return {
      create: async (options) => this.locker(this.#options(options)),
      peer: async (_locker, options) => this.locker(this.#options(options)),
      fencing: true,
      handOff: false,
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

/** Resolves once `client` is connected, or after two seconds (it may never connect: a test stopped its server). */
function connectedOrGivenUp(client: Client): Promise<void> {
  if (client.getState().name === "SYNC_CONNECTED") return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      client.removeListener("connected", done);
      resolve();
    };
    const timer = setTimeout(done, 2000);
    client.once("connected", done);
  });
}
