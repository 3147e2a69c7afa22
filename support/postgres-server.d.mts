/** Types of postgres-server.mjs (hand-written: TypeScript does not read the .mjs file). */
import type { Pool, PoolConfig } from "pg";

/** The only address anything here listens on or connects to. */
export declare const HOST: "127.0.0.1";

/** How a server is started. */
export interface PostgresServerOptions {
  /** Extra `postgres` arguments after the defaults, e.g. `["-c", "max_connections=20"]`. */
  readonly args?: readonly string[];
  /** How long a start may take before it fails (ms, default 20 000). */
  readonly startTimeoutMs?: number;
}

/** One PostgreSQL server (a fresh cluster from `initdb`) on a free 127.0.0.1 port, in its own directory. */
export declare class PostgresServer {
  private constructor(port: number, options: PostgresServerOptions);
  /** Runs `initdb` and starts a server on a free port; resolves once it accepts queries. */
  static start(options?: PostgresServerOptions): Promise<PostgresServer>;
  /** The port, the same across restarts. */
  readonly port: number;
  /** The server's temporary directory (removed by stop()). */
  readonly dir: string;
  /** The cluster's data directory (inside `dir`). */
  readonly dataDir: string;
  /** "127.0.0.1". */
  readonly host: "127.0.0.1";
  /** Process id of the postmaster (undefined while stopped). */
  readonly pid: number | undefined;
  /** True while the postmaster runs. */
  readonly running: boolean;
  /** Connection settings for `pg.Client` and `pg.Pool`. */
  readonly connection: { host: string; port: number; user: string; database: string };
  /** `postgres://postgres@127.0.0.1:port/postgres`. */
  readonly url: string;
  /** The last few KB of the server's output. */
  log(): string;
  /** A new `pg.Pool` for this server (errors of idle clients swallowed). The caller ends it. */
  pool(options?: PoolConfig): Pool;
  /** Runs one SQL statement on a short-lived connection and returns its rows. */
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
  /** Kills the postmaster and every backend (SIGKILL) and waits for the postmaster to exit. */
  kill(): Promise<void>;
  /** Immediate shutdown (every session cut) and a start on the same port and data directory. */
  restart(): Promise<void>;
  /** Stops the server for good and removes its directory. Never rejects. */
  stop(): Promise<void>;
  /** Synchronous kill and directory removal, for exit handlers. Prefer stop(). */
  killSync(): void;
}

/** The directory of `initdb` and `postgres` (PATH, else the newest /usr/lib/postgresql/<v>/bin). */
export declare function postgresBinDir(): string;

/** The installed server version (e.g. "15.20"). */
export declare function postgresVersion(): string;

/** Asks the kernel for a free TCP port on 127.0.0.1 (never 5432). */
export declare function freePort(): Promise<number>;

/** Kills every server of this process still running and removes its directory (synchronous). */
export declare function killAllPostgresServers(): void;

/** Starts `count` independent servers; if one fails, the others are stopped and the error is thrown. */
export declare function startPostgresServers(count: number, options?: PostgresServerOptions): Promise<PostgresServer[]>;

/** Whether a server (or a pooler) at `connection` answers `SELECT 1` on a new connection. */
export declare function answersQueries(connection: {
  host: string;
  port: number;
  user: string;
  database: string;
}): Promise<boolean>;

/** A new `pg.Pool` on `connection` (a server or a pooler; errors of idle clients swallowed). The caller ends it. */
export declare function poolOf(
  connection: { host: string; port: number; user: string; database: string },
  options?: PoolConfig,
): Pool;
