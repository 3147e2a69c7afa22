/** What the command line of `globallock` asks for, as `parseCommandLine` reads it. */

/** Where the locks live: lock files of this host (default), or one or several Redis servers. */
export type StoreChoice = { readonly kind: "file"; readonly directory: string | undefined } | RedisChoice;

/** One Redis server (a {@link RedisLocker} on one node) or several (a Redlock quorum). */
export interface RedisChoice {
  readonly kind: "redis";
  readonly urls: readonly string[];
}

/** What the lost-lock policy does (see `--on-lost`). */
export type OnLost = "warn" | "kill";

/** `globallock run`. */
export interface RunCommand {
  readonly command: "run";
  readonly store: StoreChoice;
  readonly key: string;
  /** `-s`: a shared lock (the store's read-write locker's `read` view) rather than an exclusive one. */
  readonly shared: boolean;
  /** Ms to wait for the lock; `undefined`: forever; 0: one attempt. */
  readonly waitMs: number | undefined;
  /** `-E`: the exit status when the lock is held elsewhere (a failed `--no-wait`, or `--wait` ran out). */
  readonly conflictExitCode: number | undefined;
  readonly expiryMs: number | undefined;
  readonly fencingEnv: string | undefined;
  readonly onLost: OnLost;
  readonly killAfterMs: number;
  /** `--owner`: the locker's owner (who `status` says holds the lock); default `hostname:pid`. */
  readonly owner: string | undefined;
  /** `--max-hold`: the longest the lease is kept (`AcquireOptions.maxHold`); `undefined`: no cap. */
  readonly maxHoldMs: number | undefined;
  /**
   * `--limit N`: at most N runs of the key at once (a permit of the store's semaphore each, instead
   * of the lock); `undefined`: an exclusive (or `--shared`) lock.
   */
  readonly limit: number | undefined;
  readonly json: boolean;
  /** The command and its arguments. */
  readonly argv: readonly [string, ...string[]];
}

/** `globallock status`. */
export interface StatusCommand {
  readonly command: "status";
  readonly store: StoreChoice;
  readonly key: string;
  readonly json: boolean;
}

/** `globallock doctor`: the deployment check of the chosen store. */
export interface DoctorCommand {
  readonly command: "doctor";
  readonly store: StoreChoice;
  readonly json: boolean;
}

/** `globallock list`: the held keys of the chosen store. */
export interface ListCommand {
  readonly command: "list";
  readonly store: StoreChoice;
  /** `--prefix`: only keys that start with it (default `""`: every key). */
  readonly prefix: string;
  /** `--limit`: the most keys listed (`undefined`: the library's default, 1000). */
  readonly limit: number | undefined;
  readonly json: boolean;
}

/** What the command line asks for. */
export type Invocation =
  | RunCommand
  | StatusCommand
  | DoctorCommand
  | ListCommand
  | { readonly command: "help"; readonly topic?: "run" | "status" | "doctor" | "list" }
  | { readonly command: "version" };
