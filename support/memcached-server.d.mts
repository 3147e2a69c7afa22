/** Types of memcached-server.mjs (hand-written: TypeScript does not read the .mjs file). */
import type Memcached from "memcached";

/** The only address anything here listens on or connects to. */
export declare const HOST: "127.0.0.1";

/** How a server is started. */
export interface MemcachedServerOptions {
  /** Extra `memcached` arguments after the defaults, e.g. `["-M"]` or `["-m", "2"]`. */
  readonly args?: readonly string[];
  /** How long a start may take before it fails (ms, default 10 000). */
  readonly startTimeoutMs?: number;
}

/** One Memcached server on a free 127.0.0.1 port. */
export declare class MemcachedServer {
  private constructor(port: number, options: MemcachedServerOptions);
  /** Starts a server on a free port and resolves once it answers `version`. */
  static start(options?: MemcachedServerOptions): Promise<MemcachedServer>;
  /** The port, the same across restarts. */
  readonly port: number;
  /** "127.0.0.1". */
  readonly host: "127.0.0.1";
  /** `127.0.0.1:port`, the location a `memcached` client takes. */
  readonly location: string;
  /** Process id of the server (undefined while killed). */
  readonly pid: number | undefined;
  /** True while the server runs (a paused one counts as running). */
  readonly running: boolean;
  /** The last few KB of the server's output. */
  log(): string;
  /** A new `memcached` client for this server with `options`. The caller ends it. */
  client(options?: Memcached.options): Memcached;
  /** Sends one line of the text protocol (`flush_all`, `delete <key>`, `stats`) and resolves with the answer. */
  command(line: string): Promise<string>;
  /** Kills the server (SIGKILL: every item is lost) and waits for it to exit. */
  kill(): Promise<void>;
  /** A crash and a start on the same port: the server comes back empty. */
  restart(): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause(): void;
  /** Thaws a paused server (SIGCONT). */
  resume(): void;
  /** Stops the server for good (SIGKILL). Idempotent, never rejects. */
  stop(): Promise<void>;
  /** Synchronous kill, for exit handlers. Prefer stop(). */
  killSync(): void;
}

/** The `memcached` binary on PATH or in /usr/bin; a clear message when it is missing. */
export declare function memcachedBinary(): string;

/** A free TCP port on 127.0.0.1, never 11211. */
export declare function freePort(): Promise<number>;

/**
 * Sends one line of Memcached's text protocol on a connection of its own and resolves with the
 * answer, or rejects after `timeoutMs` (default 2000).
 */
export declare function rawCommand(
  port: number,
  line: string,
  options?: { readonly timeoutMs?: number },
): Promise<string>;

/** Kills every server of this process still running (synchronous). */
export declare function killAllMemcachedServers(): void;
