import { InvalidArgumentError } from "../errors.js";
import { validateSignal } from "../internal/validate.js";
import type { Locker } from "../locker.js";
import { type Finding, finding } from "./finding.js";

/**
 * The registered symbol under which a locker keeps its deployment check: the same in every copy
 * of this package in a process (the ESM and the CommonJS build), so a locker of either copy is
 * checked by either's {@link checkDeployment}.
 */
const CHECK = Symbol.for("globallock.checkDeployment");

/** A locker's deployment check: reads only, a few commands. */
export type DeploymentCheck = (signal: AbortSignal | undefined) => Promise<Finding[]>;

/**
 * Gives each of `lockers` the deployment check (called by each locker's constructor; a read-write
 * locker gives it to itself and both views).
 */
export function attachDeploymentCheck(lockers: readonly object[], check: DeploymentCheck): void {
  for (const locker of lockers) Object.defineProperty(locker, CHECK, { value: check, enumerable: false });
}

/** The deployment check `locker` carries, if it is one of this package's lockers. */
export function deploymentCheckOf(locker: object): DeploymentCheck | undefined {
  const check = (locker as { [CHECK]?: unknown })[CHECK];
  return typeof check === "function" ? (check as DeploymentCheck) : undefined;
}

/**
 * Checks the setup of the store `locker` runs on against what its locks need (seed 003's "Is it
 * reliable?" list): an eviction policy that can drop lock keys, no persistence, replication,
 * scripting refused, a clock far from the server's (Redis); a transaction pooler or a read-only
 * server (PostgreSQL, MySQL); a read-only server or a statement-mode pooler (the table lockers,
 * for which a transaction pooler is fine); a network file system or a journal mode other than WAL
 * (SQLite); a network file system or a per-user lock directory (files); a single-member cluster
 * (etcd, ZooKeeper); evictions (Memcached). Reads only and sends a few commands; never
 * changes the store.
 * Resolves to what it found (empty: nothing to report). A store that cannot be reached, or a
 * setting it may not read, is itself a finding, not a rejection. Rejects with the signal's
 * reason when `signal` aborts, and with an InvalidArgumentError for something that is not a
 * locker of this package.
 */
export async function checkDeployment(locker: Locker, signal?: AbortSignal): Promise<Finding[]> {
  validateSignal(signal);
  if (typeof locker !== "object" || locker === null) {
    throw new InvalidArgumentError("locker", "a Locker of globallock", locker);
  }
  signal?.throwIfAborted();
  const check = deploymentCheckOf(locker);
  if (check === undefined) {
    return [
      finding(
        "info",
        "unknown-locker",
        `${locker.constructor?.name ?? "This locker"} is not one of globallock's lockers: nothing can be checked`,
      ),
    ];
  }
  const found = check(signal);
  if (signal === undefined) return found;
  return new Promise<Finding[]>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    found.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
