import { CoreLocker } from "../core/core-locker.js";
import { LockCore } from "../core/lock-core.js";
import { UnsupportedError } from "../errors.js";
import { checkWeight, DEFAULT_ACQUIRE_OPTIONS, type ResolvedAcquireOptions } from "../internal/validate.js";
import type { Locker } from "../locker.js";
import type { ReadWriteLocker } from "../read-write.js";
import {
  type RedisLockerOptions,
  type ResolvedRedisLockerOptions,
  resolveClients,
  resolveOptions,
  withDefaultPrefix,
} from "./options.js";
import { redisBackend } from "./redis-backend.js";
import type { RedisClient } from "./types.js";

/** The default `prefix` of a {@link RedisReadWriteLocker}: its keys never collide with locks' keys. */
export const READ_WRITE_PREFIX = "globallock:rw:";

/**
 * Permits of a read-write key: a reader takes one, a writer all of them. (A billion readers at
 * once is beyond any real use; Lua numbers count them exactly.)
 */
const PERMITS = 1_000_000_000;

/** One view of a {@link RedisReadWriteLocker}: the readers' or the writers' {@link Locker}. */
class ReadWriteView extends CoreLocker<ResolvedRedisLockerOptions> {
  protected readonly defaultRequest: ResolvedAcquireOptions;
  readonly #writer: boolean;

  constructor(engine: LockCore<ResolvedRedisLockerOptions>, writer: boolean) {
    super(engine, writer ? "redis-write" : "redis-read");
    this.#writer = writer;
    this.defaultRequest = writer ? { ...DEFAULT_ACQUIRE_OPTIONS, weight: PERMITS } : DEFAULT_ACQUIRE_OPTIONS;
  }

  protected request(options: ResolvedAcquireOptions): ResolvedAcquireOptions {
    checkWeight(options.weight, 1, "a read or write lease takes one lock");
    if (options.fencing && !this.#writer) {
      throw new UnsupportedError("Fencing tokens need an exclusive grant: use them on write leases, not read leases");
    }
    return this.#writer ? { ...options, weight: PERMITS } : options;
  }
}

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
export class RedisReadWriteLocker implements ReadWriteLocker {
  /** Shared (read) leases: many at once, none while a writer holds the key. */
  readonly read: Locker;
  /** Exclusive (write) leases. */
  readonly write: Locker;
  readonly #engine: LockCore<ResolvedRedisLockerOptions>;

  /**
   * @param clients one client (a single node or a Cluster: ioredis, or node-redis connected by the
   *   caller); the caller owns it.
   * @param options the locker's options (default prefix {@link READ_WRITE_PREFIX}).
   */
  constructor(clients: RedisClient | RedisClient[], options?: RedisLockerOptions) {
    const list = resolveClients(clients);
    if (list.length > 1) {
      throw new UnsupportedError(
        `RedisReadWriteLocker needs one Redis node or a Cluster, not a Redlock quorum of ${list.length} nodes`,
      );
    }
    const resolved = resolveOptions(withDefaultPrefix(options, READ_WRITE_PREFIX));
    this.#engine = new LockCore(resolved, redisBackend(list, resolved, PERMITS), PERMITS);
    this.read = new ReadWriteView(this.#engine, false);
    this.write = new ReadWriteView(this.#engine, true);
  }

  /** Number of leases held now, read and write (see `RedisLocker.heldCount`). */
  get heldCount(): number {
    return this.#engine.heldCount;
  }

  /** Number of callers (readers and writers) waiting in `lock` or `acquire` (see `RedisLocker.waitingCount`). */
  get waitingCount(): number {
    return this.#engine.waitingCount;
  }

  /** Closes both views: see `Locker.close`. Idempotent. */
  close(): Promise<void> {
    return this.#engine.close();
  }
}
