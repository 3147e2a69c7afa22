import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkRedis } from "../deployment/redis.js";
import { CoreSemaphore } from "../lockers/core-semaphore.js";
import { splitSemaphoreOptions } from "../lockers/semaphore-options.js";
import type { RedisLockerOptions, ResolvedRedisLockerOptions } from "./options.js";
import { refuseQuorum, refuseScriptless, resolveClients, resolveOptions, withDefaultPrefix } from "./options.js";
import { redisBackend } from "./redis-backend.js";
import type { RedisClient } from "./types.js";

/** Options of {@link RedisSemaphore}: the locker's options plus the number of permits per key. */
export interface RedisSemaphoreOptions extends RedisLockerOptions {
  /**
   * Permits per key (required): a positive safe integer. Every semaphore using a key must pass
   * the same limit (it is sent with every call; Redis does not store it).
   */
  limit: number;
}

/** The default `prefix` of a {@link RedisSemaphore}: its keys never collide with locks' keys. */
export const SEMAPHORE_PREFIX = "globallock:semaphore:";

/**
 * A counting semaphore on one Redis node or a Redis Cluster: at most `limit` permits of a key are
 * held at once, across every process using the same Redis. It is a {@link Locker}: `lock` takes
 * one permit, `acquire(…, { weight })` several (1..limit), and every lease is extended, reported
 * lost and released like a lock's.
 *
 * - A key is a sorted set of holders (token and weight, scored by deadline): entries expire on
 *   their own, so a crashed holder's permits come back after `expiry`.
 * - Waiters are served strictly in arrival order, across processes: an attempt never takes
 *   permits while a live waiter is queued ahead of it, and a release grants the freed permits to
 *   queued waiters from the head for as long as they fit. A heavy waiter is therefore never
 *   overtaken by lighter ones that arrived after it (they wait behind it).
 * - A Redlock quorum is refused with an {@link UnsupportedError}: with permits counted on each
 *   node, holders that each won a different majority can exceed the limit (three nodes, limit 2:
 *   holders on nodes {1,2}, {2,3} and {1,3} are three holders while no node counts more than two).
 * - `fencing: true` is an {@link UnsupportedError} unless `limit` is 1: tokens order exclusive
 *   grants, and permits are shared.
 */
export class RedisSemaphore extends CoreSemaphore<ResolvedRedisLockerOptions> {
  /**
   * @param clients one client (a single node or a Cluster: ioredis, or node-redis connected by the
   *   caller); the caller owns it.
   * @param options the locker's options (default prefix {@link SEMAPHORE_PREFIX}) and `limit`.
   */
  constructor(clients: RedisClient | RedisClient[], options: RedisSemaphoreOptions) {
    const list = resolveClients(clients);
    const { limit, rest } = splitSemaphoreOptions(options);
    refuseQuorum(
      list,
      "RedisSemaphore",
      ": permits counted on each node can exceed the limit when holders win different majorities",
    );
    const resolved = resolveOptions(withDefaultPrefix(rest, SEMAPHORE_PREFIX));
    refuseScriptless(resolved, "RedisSemaphore", "its permits and their queue are counted by scripts");
    super(resolved, redisBackend(list, resolved, limit), limit, "redis-semaphore");
    attachDeploymentCheck([this], () => checkRedis(list));
  }

  /** @internal */
  protected fencingRefusal(): string {
    return `Fencing tokens need an exclusive grant; a semaphore with limit ${this.limit} shares its permits`;
  }
}
