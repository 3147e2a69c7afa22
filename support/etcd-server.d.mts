/** Types of etcd-server.mjs (hand-written: TypeScript does not read the .mjs file). */
import type { ChildProcess } from "node:child_process";
import type { Etcd3, IOptions } from "etcd3";

/** The only address anything here listens on or connects to. */
export declare const HOST: "127.0.0.1";

/** Kills every etcd of this process still running and removes its directories (synchronous). */
export declare function killAllEtcdServers(): void;

/** The `etcd` binary on PATH; throws a clear message when etcd is not installed. */
export declare function etcdBinary(): string;

/** One member of an {@link EtcdCluster}. */
export interface EtcdMember {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  /** `http://127.0.0.1:<clientPort>`. */
  readonly endpoint: string;
  readonly running: boolean;
  readonly child: ChildProcess | undefined;
  /** The last few KB of its output. */
  readonly log: string;
}

/** How a cluster is started. */
export interface EtcdClusterOptions {
  /** Members (default 1). */
  readonly members?: number;
  /** How long a start may take before it fails (ms, default 20 000). */
  readonly startTimeoutMs?: number;
}

/** One etcd cluster (one or more members) on free 127.0.0.1 ports, in its own directory. */
export declare class EtcdCluster {
  private constructor();
  /** Starts the members and resolves once the cluster has a leader. */
  static start(options?: EtcdClusterOptions): Promise<EtcdCluster>;
  readonly members: readonly EtcdMember[];
  /** The cluster's temporary directory (removed by stop()). */
  readonly dir: string;
  /** Every member's client URL. */
  readonly endpoints: string[];
  /** A client on every member (the caller closes it). */
  client(options?: Partial<IOptions>): Etcd3;
  /** Resolves with the leader once every running member agrees on one; rejects after `timeoutMs`. */
  waitForLeader(timeoutMs?: number): Promise<EtcdMember>;
  /** The member every running member names as leader, or undefined while they disagree. */
  leader(): Promise<EtcdMember | undefined>;
  /** SIGKILLs one member (default: the leader) and resolves with it. */
  kill(member?: EtcdMember): Promise<EtcdMember>;
  /** Starts a killed member again on its ports, with its data. */
  restart(member: EtcdMember): void;
  /** Stops every member and removes the directories. Idempotent. */
  stop(): Promise<void>;
  /** Kills every member and removes the directories, synchronously. */
  killSync(): void;
}
