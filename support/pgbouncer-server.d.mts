/** Types of pgbouncer-server.mjs (hand-written: TypeScript does not read the .mjs file). */
import type { Pool, PoolConfig } from "pg";
import type { PostgresServer } from "./postgres-server.mjs";

/** How a pooler is started. */
export interface PgBouncerOptions {
  /** PgBouncer's `pool_mode`. */
  readonly poolMode: "session" | "transaction" | "statement";
  /** Server connections in the pool (`default_pool_size`, default 2). */
  readonly poolSize?: number;
}

/** One PgBouncer on a free 127.0.0.1 port in front of a PostgreSQL server the test started. */
export declare class PgBouncerServer {
  private constructor(port: number, upstream: PostgresServer, options: PgBouncerOptions);
  /** Starts a pooler in front of `upstream`; resolves once it answers a query. */
  static start(upstream: PostgresServer, options: PgBouncerOptions): Promise<PgBouncerServer>;
  readonly port: number;
  readonly upstream: PostgresServer;
  readonly poolMode: PgBouncerOptions["poolMode"];
  readonly poolSize: number;
  /** The pooler's temporary directory (removed by stop()). */
  readonly dir: string;
  /** Connection settings for `pg.Client` and `pg.Pool` through the pooler. */
  readonly connection: { host: string; port: number; user: string; database: string };
  /** The last few KB of the pooler's output. */
  log(): string;
  /** A new `pg.Pool` through the pooler (errors of idle clients swallowed). The caller ends it. */
  pool(options?: PoolConfig): Pool;
  /** Stops the pooler and removes its directory. Never rejects. */
  stop(): Promise<void>;
  /** Synchronous kill, for exit handlers. Prefer stop(). */
  killSync(): void;
}
