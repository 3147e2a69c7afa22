/** Types of redis-server.mjs (hand-written: TypeScript does not read the .mjs file). */
import type { ChildProcess } from "node:child_process";
import type { Redis, RedisOptions } from "ioredis";

/** The only address anything here listens on or connects to. */
export declare const HOST: "127.0.0.1";

/**
 * ioredis settings for clients that must survive kills and restarts: a command fails after one
 * reconnection attempt, and the client reconnects every 50 ms.
 */
export declare const RESILIENT_CLIENT: Readonly<{ maxRetriesPerRequest: number; retryStrategy: () => number }>;

/** How a server is started. Every field is optional. */
export interface RedisServerOptions {
  /** Extra redis-server arguments, after the defaults (so they override them), e.g. `["--maxmemory", "10mb"]`. */
  readonly args?: readonly string[];
  /**
   * Contents of a config file written once into the server's directory and passed as the first
   * argument (Sentinel needs one it can rewrite). A function gets the server's port and directory.
   */
  readonly config?: string | ((server: { readonly port: number; readonly dir: string }) => string);
  /** Run as a Sentinel (`redis-server <conf> --sentinel`); an empty config file is made if none is given. */
  readonly sentinel?: boolean;
  /** redis-server `--loglevel` (default "warning"); the output's tail is in `log()`. */
  readonly loglevel?: "debug" | "verbose" | "notice" | "warning";
  /**
   * Rewrites the command line before each spawn, e.g. to pin redis-server to a CPU:
   * `(command, args) => ["taskset", ["-c", "1", command, ...args]]`.
   */
  readonly wrapCommand?: (command: string, args: string[]) => [string, string[]];
  /**
   * Called with every child process spawned (first start and each restart), e.g. to register it
   * with a cleanup backstop; a function returned is called when that child exits.
   */
  readonly onSpawn?: (child: ChildProcess) => (() => unknown) | undefined;
  /** How stop() ends the process: "SIGKILL" (default) or "SIGTERM" (then SIGKILL after 2 s). */
  readonly stopSignal?: "SIGKILL" | "SIGTERM";
  /** How long a start may take before it fails (ms, default 10 000). */
  readonly startTimeoutMs?: number;
  /** Prefix of the temporary directory's name (default "globallock-redis-"). */
  readonly dirPrefix?: string;
}

/** One redis-server (or Sentinel) child process on a free 127.0.0.1 port, in its own directory. */
export declare class RedisServer {
  private constructor(port: number, options: RedisServerOptions);
  /**
   * Starts a server on a free port and resolves once it answers PING (retrying on another port if
   * the start fails). An array is the older form: extra redis-server arguments.
   */
  static start(options?: RedisServerOptions | readonly string[]): Promise<RedisServer>;
  /** The port, the same across restarts. */
  readonly port: number;
  /** The server's own temporary directory (removed by stop()). */
  readonly dir: string;
  /** Whether this is a Sentinel. */
  readonly sentinel: boolean;
  /** The config file passed to redis-server, if any. */
  readonly configFile: string | undefined;
  /** The current child process (undefined after kill()). */
  readonly process: ChildProcess | undefined;
  /** Process id of the current process (undefined while killed). */
  readonly pid: number | undefined;
  /** Every pid this server has had (a restart starts a new process). */
  readonly pids: readonly number[];
  /** True while the process runs (a paused process counts as running). */
  readonly running: boolean;
  /** True between pause() and resume(). */
  readonly paused: boolean;
  /** True once stop() was called. */
  readonly stopped: boolean;
  /** "127.0.0.1". */
  readonly host: "127.0.0.1";
  /** `redis://127.0.0.1:port`. */
  readonly url: string;
  /** The last few KB of the server's stdout and stderr. */
  log(): string;
  /**
   * A new ioredis client for this server, with RESILIENT_CLIENT settings unless overridden; errors
   * are swallowed (they surface as failed commands). The caller disconnects it.
   */
  client(options?: RedisOptions): Redis;
  /** Kills the process with SIGKILL (a crash: nothing is saved) and waits for it to exit. */
  kill(): Promise<void>;
  /** Kills the server if running and starts it again on the same port, empty (no persistence). */
  restart(): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause(): void;
  /** Thaws a paused server (SIGCONT). */
  resume(): void;
  /** Stops the server for good and removes its directory. Idempotent, never rejects. */
  stop(): Promise<void>;
  /** Synchronous SIGKILL and directory removal, for exit handlers. Prefer stop(). */
  killSync(): void;
}

/** Throws a clear message when redis-server is not installed. */
export declare function assertRedisServerInstalled(): void;

/** The installed redis-server version (e.g. "7.0.15"); throws a clear error when it is missing. */
export declare function redisServerVersion(): string;

/** Asks the kernel for a free TCP port on 127.0.0.1 (never 6379). */
export declare function freePort(): Promise<number>;

/** Kills every server of this process still running and removes its directory (synchronous). */
export declare function killAllServers(): void;

/** Starts `count` independent servers; if one fails, the others are stopped and the error is thrown. */
export declare function startServers(
  count: number,
  options?: RedisServerOptions | readonly string[],
): Promise<RedisServer[]>;

/** Stops every server given (in parallel), never rejects. */
export declare function stopServers(servers: readonly (RedisServer | undefined)[]): Promise<void>;

/**
 * Starts a Redis Cluster of `count` masters (default 3, no replicas) with its slots assigned by
 * `redis-cli --cluster create`, resolving once every node reports `cluster_state:ok`.
 */
export declare function startCluster(
  count?: number,
  options?: RedisServerOptions | readonly string[],
): Promise<RedisServer[]>;

/** How a Sentinel group is started. */
export interface SentinelGroupOptions {
  /** Default "mymaster". */
  readonly masterName?: string;
  /** Replicas of the master (default 1). */
  readonly replicas?: number;
  /** Sentinels (default 3). */
  readonly sentinels?: number;
  /** Sentinels that must agree the master is down (default: a majority, 2 of 3). */
  readonly quorum?: number;
  /** `sentinel down-after-milliseconds` (default 500). */
  readonly downAfterMs?: number;
  /** `sentinel failover-timeout` (default 2000). */
  readonly failoverTimeoutMs?: number;
  /** How long the start may wait for sync and discovery (ms, default 20 000). */
  readonly readyTimeoutMs?: number;
  /** Options for every process of the group (master, replicas, Sentinels), e.g. `onSpawn`. */
  readonly serverOptions?: RedisServerOptions;
}

/** An address as Sentinel reports it. */
export interface MasterAddress {
  readonly host: string;
  readonly port: number;
}

/** What waitForFailover resolves with. */
export interface FailoverResult extends MasterAddress {
  /** The group's server on that port. */
  readonly server: RedisServer | undefined;
  /** How long the wait took (ms). */
  readonly elapsedMs: number;
}

/** A running Sentinel group: one master, its replicas, and the Sentinels monitoring it. */
export interface SentinelGroup {
  /** The master's name in the Sentinels ("mymaster"). */
  readonly masterName: string;
  /** The master at start (after a failover it is no longer the master). */
  readonly master: RedisServer;
  /** The replicas at start. */
  readonly replicas: readonly RedisServer[];
  /** The first replica (convenience for one-replica groups). */
  readonly replica: RedisServer;
  /** The Sentinels. */
  readonly sentinels: readonly RedisServer[];
  /** The Sentinels' ports. */
  readonly sentinelPorts: readonly number[];
  /** `[{ host: "127.0.0.1", port }, …]`, for ioredis' `sentinels` option. */
  readonly sentinelAddresses: readonly MasterAddress[];
  /** Master and replicas. */
  readonly servers: readonly RedisServer[];
  /** Port of the master as this object last saw it (updated by waitForFailover). */
  readonly masterPort: number;
  /**
   * A new ioredis client that finds the master through the Sentinels (`role: "master"` unless
   * overridden), with RESILIENT_CLIENT settings; errors are swallowed. Disconnected by stop().
   */
  client(options?: RedisOptions): Redis;
  /** A plain client to Sentinel number `index` (default 0), for SENTINEL commands. Disconnected by stop(). */
  sentinelClient(index?: number): Redis;
  /** The group's server listening on `port`, if any. */
  serverOn(port: number): RedisServer | undefined;
  /** Each Sentinel's answer to `SENTINEL get-master-addr-by-name` (undefined: down or no answer). */
  masterAddresses(): Promise<(MasterAddress | undefined)[]>;
  /**
   * Waits until every running Sentinel reports a master other than `from` (default: the master
   * last seen by this object), all agreeing, and that server has `role:master`.
   */
  waitForFailover(options?: { readonly from?: number; readonly timeoutMs?: number }): Promise<FailoverResult>;
  /** Waits until every running replica reports `master_link_status:up` to `master` (default: the current one). */
  waitForReplication(master?: RedisServer, timeoutMs?: number): Promise<void>;
  /** Waits until every Sentinel sees the master up and knows every replica and the other Sentinels. */
  waitForSentinels(timeoutMs?: number): Promise<void>;
  /** Disconnects the clients made here, then stops every Sentinel and server. Never rejects. */
  stop(): Promise<void>;
}

/**
 * Starts a Sentinel group on free loopback ports: a master, replicas (`--replicaof`) and Sentinels
 * (`redis-server <conf> --sentinel`), resolving once the replicas are in sync and every Sentinel
 * knows them and its peers. On a failed start everything started is stopped.
 */
export declare function startSentinelGroup(options?: SentinelGroupOptions): Promise<SentinelGroup>;
