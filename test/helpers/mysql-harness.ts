import type { Pool } from "mysql2/promise";
import { MySqlLocker, type MySqlLockerOptions } from "../../src/index.js";
import { MariaDbServer } from "../../support/mariadb-server.mjs";
import type { LockerHarness } from "../contracts/contract.js";

export { MariaDbServer } from "../../support/mariadb-server.mjs";

/** Lockers on one real MariaDB server, each on its own pool (like separate processes). */
export class MySqlFixture {
  readonly server: MariaDbServer;
  readonly pools: Pool[] = [];
  readonly lockers: MySqlLocker[] = [];

  constructor(server: MariaDbServer) {
    this.server = server;
  }

  static async start(): Promise<MySqlFixture> {
    return new MySqlFixture(await MariaDbServer.start());
  }

  /** A new pool on the server (ended by `stop`). */
  pool(connectionLimit = 4): Pool {
    const pool = this.server.pool({ connectionLimit });
    this.pools.push(pool);
    return pool;
  }

  /** A new locker on a new pool. */
  locker(options?: MySqlLockerOptions, pool: Pool = this.pool()): MySqlLocker {
    const locker = new MySqlLocker(pool, options);
    this.lockers.push(locker);
    return locker;
  }

  /**
   * Closes lockers, stops the server, ends pools. (Tests leave leases held, which keep their
   * locker's connection for up to `expiry` after close: the server goes first so nothing waits.)
   */
  async stop(): Promise<void> {
    await Promise.allSettled(this.lockers.map((locker) => locker.close()));
    await this.server.stop();
    await Promise.allSettled(this.pools.map((pool) => pool.end()));
  }

  /**
   * The contract harness for this server. Its cleanup closes the lockers it made (the server
   * stays up for the file's next suite: stop the fixture in the file's `afterAll`).
   */
  harness(base: MySqlLockerOptions = {}): LockerHarness {
    const made: MySqlLocker[] = [];
    const create = (options?: { wakeOnly?: boolean }): MySqlLocker => {
      const locker = this.locker(options?.wakeOnly ? { ...base, backoff: { min: 20_000, max: 20_000 } } : base);
      made.push(locker);
      return locker;
    };
    return {
      create: async (options) => create(options),
      peer: async (_locker, options) => create(options),
      fencing: true,
      cleanup: async () => {
        await Promise.allSettled(made.map((locker) => locker.close()));
      },
    };
  }
}
