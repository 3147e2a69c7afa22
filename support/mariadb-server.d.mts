/** Types of mariadb-server.mjs (hand-written: TypeScript does not read the .mjs file). */
import type { Pool, PoolOptions } from "mysql2/promise";

/** The only address anything here listens on or connects to. */
export declare const HOST: "127.0.0.1";

/** How a server is started. */
export interface MariaDbServerOptions {
  /** Extra `mariadbd` arguments after the defaults, e.g. `["--max-connections=20"]`. */
  readonly args?: readonly string[];
  /** How long a start may take before it fails (ms, default 30 000). */
  readonly startTimeoutMs?: number;
}

/** One MariaDB server (a fresh data directory) on a free 127.0.0.1 port, in its own directory. */
export declare class MariaDbServer {
  private constructor(port: number, options: MariaDbServerOptions);
  /** Installs a data directory and starts a server on a free port; resolves once it answers. */
  static start(options?: MariaDbServerOptions): Promise<MariaDbServer>;
  /** The port, the same across restarts. */
  readonly port: number;
  /** The server's temporary directory (removed by stop()). */
  readonly dir: string;
  /** The data directory (inside `dir`). */
  readonly dataDir: string;
  /** The server's Unix socket (inside `dir`). */
  readonly socket: string;
  /** "127.0.0.1". */
  readonly host: "127.0.0.1";
  /** Process id of the server (undefined while stopped). */
  readonly pid: number | undefined;
  /** True while the server runs. */
  readonly running: boolean;
  /** Connection settings for `mysql2` (user `root`, database `globallock`, made at the start). */
  readonly connection: { host: string; port: number; user: string; database: string };
  /** The last few KB of the server's output. */
  log(): string;
  /** A new `mysql2/promise` pool for this server. The caller ends it. */
  pool(options?: PoolOptions): Pool;
  /** Runs one SQL statement on a short-lived connection and returns its rows. */
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
  /** Kills the server (SIGKILL) and waits for it to exit. */
  kill(): Promise<void>;
  /** A crash (every connection cut) and a start on the same port and data directory. */
  restart(): Promise<void>;
  /** Stops the server for good and removes its directory. Never rejects. */
  stop(): Promise<void>;
  /** Synchronous kill and directory removal, for exit handlers. Prefer stop(). */
  killSync(): void;
}

/** The installed server version (e.g. "10.11.19"). */
export declare function mariaDbVersion(): string;

/** A free TCP port on 127.0.0.1, never 3306. */
export declare function freePort(): Promise<number>;

/** Kills every server of this process still running and removes its directory (synchronous). */
export declare function killAllMariaDbServers(): void;
