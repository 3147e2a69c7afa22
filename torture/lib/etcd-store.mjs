/**
 * The etcd store of scenarios 25–27: a real etcd cluster (one member or three) started by the
 * shared launcher (support/etcd-server.mjs) on free loopback ports in a temporary directory, with
 * an admin client the parent reads it with. Worker processes reach it through their own `Etcd3`
 * clients on every member's endpoint (worker mode "etcd").
 *
 * Where an `EtcdLocker` keeps `key` (see src/etcd/layout.ts): one etcd key per holder under the
 * directory `<prefix><bytes of key>:<key>/`, whose value is `<token> <weight> <owner>`.
 */
import { EtcdCluster, etcdBinary } from "../../support/etcd-server.mjs";

/**
 * Why this machine cannot run the etcd scenarios (no `etcd` on PATH; or TORTURE_NO_ETCD=1, which
 * forces the SKIP), or undefined when it can.
 */
export function etcdUnavailable() {
  if (process.env.TORTURE_NO_ETCD === "1") return "TORTURE_NO_ETCD=1";
  try {
    etcdBinary();
    return undefined;
  } catch (error) {
    return String(error?.message ?? error);
  }
}

/**
 * Where etcd is missing, records the one check that says SKIP and why, ends the run (its common
 * checks still apply) and resolves with the metrics of a skipped run; else resolves undefined.
 */
export async function skipWithoutEtcd(ctx, checks) {
  const reason = etcdUnavailable();
  if (reason === undefined) return undefined;
  checks.add("etcd installed (else SKIP)", true, "etcd, or SKIP", `SKIP: ${reason}`);
  await ctx.finish(checks, []);
  return { skipped: 1, skipReason: reason };
}

/** The observed column of skipped runs ("SKIP: why"), or undefined when none was skipped. */
export function skippedObserved(results) {
  const skipped = results.find((result) => result.metrics?.skipped);
  return skipped === undefined ? undefined : `SKIP: ${skipped.metrics.skipReason}`;
}

/** One run's etcd cluster and the parent's client on it. */
export class EtcdStore {
  /**
   * @param {EtcdCluster} cluster
   * @param {string} prefix the lockers' prefix (every key of the run starts with it)
   */
  constructor(cluster, prefix) {
    this.cluster = cluster;
    this.prefix = prefix;
    // Short deadlines: a read of the parent must not hang on a member that was killed.
    this.admin = cluster.client({ dialTimeout: 1000 });
  }

  /** Starts a cluster of `members` and resolves once it has a leader. */
  static async start(members, prefix) {
    return new EtcdStore(await EtcdCluster.start({ members }), prefix);
  }

  /** Every member's client URL (all of them, killed ones included: clients fail over). */
  get endpoints() {
    return this.cluster.endpoints;
  }

  /** Pids of every member's process, running or not (for "no process left running"). */
  get pids() {
    return this.cluster.members.map((member) => member.child?.pid).filter((pid) => pid !== undefined);
  }

  /** The directory of `key`'s holder entries. */
  directory(key) {
    return `${this.prefix}${Buffer.byteLength(key, "utf8")}:${key}/`;
  }

  /** Tokens of `key`'s holders, sorted and comma-separated; null when nobody holds it. */
  async holdersValue(key) {
    const values = Object.values(await this.admin.getAll().prefix(this.directory(key)).strings());
    if (values.length === 0) return null;
    return values
      .map((value) => value.split(" ")[0])
      .sort()
      .join(",");
  }

  /** Every etcd key of the run (lock entries of any key), with its value: [{ key, value }]. */
  async leftovers() {
    const all = await this.admin.getAll().prefix(this.prefix).strings();
    return Object.entries(all).map(([key, value]) => ({ key, value }));
  }

  /** Closes the admin client and stops every member (removing their directories). */
  async stop() {
    this.admin.close();
    await this.cluster.stop();
  }
}
