import type { Pool } from "pg";
import { PostgresLocker, type PostgresLockerOptions } from "../../src/index.js";
import type { PgBouncerServer } from "../../support/pgbouncer-server.mjs";
import { PostgresServer } from "../../support/postgres-server.mjs";
import type { LockerHarness } from "../contracts/contract.js";

export { PostgresServer, startPostgresServers } from "../../support/postgres-server.mjs";

/**
 * Lockers on one real PostgreSQL server, each on its own pool (like separate processes); through
 * `pooler` (a PgBouncer in front of the server) when one is given.
 */
export class PostgresFixture {
  readonly server: PostgresServer;
  readonly pooler: PgBouncerServer | undefined;
  readonly pools: Pool[] = [];
  readonly lockers: PostgresLocker[] = [];

  constructor(server: PostgresServer, pooler?: PgBouncerServer) {
    this.server = server;
    this.pooler = pooler;
  }

  static async start(): Promise<PostgresFixture> {
    return new PostgresFixture(await PostgresServer.start());
  }

  /** A new pool on the server (ended by `stop`). */
  pool(max = 4): Pool {
    const pool = (this.pooler ?? this.server).pool({ max, application_name: "globallock-test" });
    this.pools.push(pool);
    return pool;
  }

  /** A new locker on a new pool. */
  locker(options?: PostgresLockerOptions, pool: Pool = this.pool()): PostgresLocker {
    const locker = new PostgresLocker(pool, options);
    this.lockers.push(locker);
    return locker;
  }

  /**
   * Closes lockers, stops the server, ends pools. (Tests leave leases held, which keep their
   * locker's connection for up to `expiry` after close: the server goes first so nothing waits.)
   */
  async stop(): Promise<void> {
    await Promise.allSettled(this.lockers.map((locker) => locker.close()));
    await this.pooler?.stop();
    await this.server.stop();
    await Promise.allSettled(this.pools.map((pool) => pool.end()));
  }

  /** The contract harness for this server. */
  harness(base: PostgresLockerOptions = {}): LockerHarness {
    const withOptions = (options?: { wakeOnly?: boolean }): PostgresLockerOptions =>
      options?.wakeOnly ? { ...base, backoff: { min: 20_000, max: 20_000 } } : base;
    return {
      create: async (options) => this.locker(withOptions(options)),
      peer: async (_locker, options) => this.locker(withOptions(options)),
      fencing: true,
      cleanup: () => this.stop(),
    };
  }
}
