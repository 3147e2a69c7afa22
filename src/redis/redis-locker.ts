import { LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkRedis } from "../deployment/redis.js";
import { UnsupportedError } from "../errors.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { type RedisLockerOptions, type ResolvedRedisLockerOptions, resolveClients, resolveOptions } from "./options.js";
import { redisBackend } from "./redis-backend.js";
import type { RedisClient } from "./types.js";

/**
 * A {@link Locker} over one Redis node, a Redis Cluster, or a Redlock quorum of independent nodes.
 *
 * - Each acquisition sets `prefix + key` to a random 16-byte token with a TTL of `expiry` (on a
 *   free key a plain SET NX); release is an atomic compare-and-delete or hand-over.
 * - In one locker, waiters of a key queue FIFO and only the head competes. On one node or a
 *   Cluster, lockers also queue across processes: a release grants the key to the longest-waiting
 *   live locker (sets it to the token that locker registered) and tells that locker alone, on its
 *   grant channel, so one release wakes one process, which holds the lock without a further round
 *   trip. On a quorum a release publishes on the key's channel and waiters try again. Messages
 *   come on one subscriber connection per node, duplicated from the caller's client.
 * - Every held lock is extended from its own validity: every `expiry / 2`, and early enough that
 *   an extension answering within `operationTimeout` lands before the lease runs out. A lock found
 *   lost is reported through `onLockLost` and the lease's `lost` signal; its holder keeps running.
 * - Fencing (`acquire(…, { fencing: true })`) needs a single client (one node or a Cluster): across
 *   independent Redlock nodes there is no single counter to rise with every grant, so it is an
 *   {@link UnsupportedError} there, thrown before anything is sent.
 * - `scripts: false` (one node, a Cluster or a Sentinel's master): no Lua at all, for a Redis that
 *   refuses scripts — compare-and-delete and compare-and-extend through WATCH/MULTI/EXEC on a
 *   connection of the locker's own, fencing included; no cross-process grant queue (waiters of
 *   other processes hear a release and try again). With scripts on, a Redis that refuses them is
 *   an {@link UnsupportedError} at the first attempt, nothing taken.
 * - The caller owns the clients: `close()` never closes them.
 */
export class RedisLocker extends CoreLocker<ResolvedRedisLockerOptions> {
  /**
   * @param clients one client (single node or Cluster: an ioredis `Redis` or `Cluster`, or a
   *   connected node-redis client or cluster), or one client per independent Redis node for a
   *   Redlock quorum (an odd number; ioredis and node-redis may be mixed). The caller creates,
   *   owns and closes them.
   * @param options see {@link RedisLockerOptions}.
   */
  constructor(clients: RedisClient | RedisClient[], options?: RedisLockerOptions) {
    const list = resolveClients(clients);
    const resolved = resolveOptions(options);
    if (!resolved.scripts && list.length > 1) {
      throw new UnsupportedError(
        `options.scripts: false needs one Redis node, a Cluster or a Sentinel's master, not a Redlock quorum of ${list.length} nodes (its votes and their undoing are scripts)`,
      );
    }
    super(new LockCore(resolved, redisBackend(list, resolved)), "redis-lock");
    attachDeploymentCheck([this], () => checkRedis(list));
  }
}
