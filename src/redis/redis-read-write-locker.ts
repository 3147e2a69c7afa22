import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkRedis } from "../deployment/redis.js";
// Referenced from doc comments only.
import type { UnsupportedError } from "../errors.js";
import type { Locker } from "../locker.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS, type ReadWriteStore } from "../lockers/read-write-views.js";
import type { RedisLockerOptions } from "./options.js";
import { refuseQuorum, refuseScriptless, resolveClients, resolveOptions, withDefaultPrefix } from "./options.js";
import { redisBackend } from "./redis-backend.js";
import type { RedisClient } from "./types.js";

/** The default `prefix` of a {@link RedisReadWriteLocker}: its keys never collide with locks' keys. */
export const READ_WRITE_PREFIX = "globallock:rw:";

/** Redis's read-write views. */
const REDIS: ReadWriteStore = { name: "redis", permits: READ_WRITE_PERMITS };

/**
 * Read-write locks on one Redis node or a Redis Cluster: per key, many readers or one writer, across
 * every process using the same Redis. `read` and `write` are {@link Locker}s of one store.
 *
 * - Waiters of both kinds share one queue per key, served in arrival order: a waiting writer blocks
 *   readers that arrive after it (writers are not starved), and when a writer releases, every
 *   reader queued before the next writer gets in together.
 * - Leases of both kinds are extended and reported lost like locks; write leases can carry fencing
 *   tokens (`fencing` on a read lease is an {@link UnsupportedError}).
 * - Closing either view closes both (they share connections and the lease keeper).
 * - A Redlock quorum is refused with an {@link UnsupportedError} (like `RedisSemaphore`).
 */
export class RedisReadWriteLocker extends CoreReadWriteLocker {
  /**
   * @param clients one client (a single node or a Cluster: ioredis, or node-redis connected by the
   *   caller); the caller owns it.
   * @param options the locker's options (default prefix {@link READ_WRITE_PREFIX}).
   */
  constructor(clients: RedisClient | RedisClient[], options?: RedisLockerOptions) {
    const list = resolveClients(clients);
    refuseQuorum(list, "RedisReadWriteLocker");
    const resolved = resolveOptions(withDefaultPrefix(options, READ_WRITE_PREFIX));
    refuseScriptless(resolved, "RedisReadWriteLocker", "its readers, writer and queue are counted by scripts");
    super(resolved, redisBackend(list, resolved, READ_WRITE_PERMITS), REDIS);
    attachDeploymentCheck([this, this.read, this.write], () => checkRedis(list));
  }
}
