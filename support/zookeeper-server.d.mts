/** Types of zookeeper-server.mjs (hand-written: TypeScript does not read the .mjs file). */
import type { Client, Option } from "node-zookeeper-client";

/** The only address anything here listens on or connects to. */
export declare const HOST: "127.0.0.1";

/** Kills every ZooKeeper server of this process still running and removes its directories (synchronous). */
export declare function killAllZooKeeperServers(): void;

/** The `java` binary; throws a clear message when Java or ZooKeeper's jar is missing. */
export declare function javaBinary(): string;

/**
 * Sends the four-letter word `word` to the server on `port` and resolves with its whole answer
 * ("" when it refuses the connection or says nothing within `timeoutMs`, default 2000).
 */
export declare function fourLetterWord(port: number, word: string, timeoutMs?: number): Promise<string>;

/** One member of a {@link ZooKeeperEnsemble}. */
export interface ZooKeeperMember {
  /** Its id (`myid`), from 1. */
  readonly id: number;
  readonly clientPort: number;
  readonly quorumPort: number;
  readonly electionPort: number;
  /** Its directory (zoo.cfg, data). */
  readonly dir: string;
  /** `127.0.0.1:<clientPort>`. */
  readonly address: string;
  readonly running: boolean;
  /** Process id of its JVM (undefined while stopped). */
  readonly pid: number | undefined;
  /** The last few KB of its output. */
  log(): string;
  /** What `srvr` says its mode is ("standalone", "leader", "follower"), or undefined while it does not serve. */
  mode(): Promise<string | undefined>;
}

/** How an ensemble is started. */
export interface ZooKeeperEnsembleOptions {
  /** Members (default 1: a standalone server). */
  readonly members?: number;
  /** How long a start may take before it fails (ms, default 60 000). */
  readonly startTimeoutMs?: number;
}

/** One ZooKeeper ensemble (a standalone server, or several members) on free 127.0.0.1 ports. */
export declare class ZooKeeperEnsemble {
  private constructor();
  /** Starts the members and resolves once a client's write succeeds. */
  static start(options?: ZooKeeperEnsembleOptions): Promise<ZooKeeperEnsemble>;
  readonly members: readonly ZooKeeperMember[];
  /** The ensemble's temporary directory (removed by stop()). */
  readonly dir: string;
  /** Every member's address, comma-separated: a client's connection string. */
  readonly connectionString: string;
  /** A client on every member, connecting (the caller closes it). */
  client(options?: Partial<Option>): Client;
  /** Resolves once a client creates (and drops) an ephemeral node; rejects after `timeoutMs`. */
  waitForWrite(timeoutMs?: number): Promise<void>;
  /** Resolves with the member that leads (or runs standalone); rejects after `timeoutMs`. */
  waitForLeader(timeoutMs?: number): Promise<ZooKeeperMember>;
  /** The running member that leads (or runs standalone), or undefined during an election. */
  leader(): Promise<ZooKeeperMember | undefined>;
  /** SIGKILLs one member (default: the leader) and resolves with it once it exited. */
  kill(member?: ZooKeeperMember): Promise<ZooKeeperMember>;
  /** Stops one member (SIGTERM: a clean shutdown, default the leader) and resolves with it once it exited. */
  stopMember(member?: ZooKeeperMember): Promise<ZooKeeperMember>;
  /** Starts a killed or stopped member again, on its ports and with its data; resolves once it serves. */
  restart(member: ZooKeeperMember, timeoutMs?: number): Promise<void>;
  /** Kills every member and removes the directory. Idempotent. */
  stop(): Promise<void>;
  /** Kills every member and removes the directory, synchronously. */
  killSync(): void;
}
