import { CoreLocker } from "../core/core-locker.js";
import { LockCore } from "../core/lock-core.js";
import { UnsupportedError } from "../errors.js";
import {
  checkWeight,
  DEFAULT_ACQUIRE_OPTIONS,
  type ResolvedAcquireOptions,
  validateOptionsObject,
} from "../internal/validate.js";
import type { Locker } from "../locker.js";
import type { ReadWriteLocker } from "../read-write.js";
import { type PostgresLockerOptions, type ResolvedPostgresLockerOptions, resolvePostgresOptions } from "./options.js";
import { postgresBackend } from "./postgres-backend.js";
import { checkPool } from "./postgres-locker.js";
import type { PostgresPool } from "./types.js";

/** The default `prefix` of a {@link PostgresReadWriteLocker}: its lock ids never collide with locks'. */
const READ_WRITE_PREFIX = "globallock:rw:";

/** Permits of a read-write key in the core's counted mode: a reader takes one, a writer all. */
const PERMITS = 1_000_000_000;

/** One view of a {@link PostgresReadWriteLocker}: the readers' or the writers' {@link Locker}. */
class ReadWriteView extends CoreLocker<ResolvedPostgresLockerOptions> {
  protected readonly defaultRequest: ResolvedAcquireOptions;
  readonly #writer: boolean;

  constructor(engine: LockCore<ResolvedPostgresLockerOptions>, writer: boolean) {
    super(engine, writer ? "postgres-write" : "postgres-read");
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
 * Read-write locks on PostgreSQL session advisory locks: per key, many readers or one writer,
 * across every process using the same database. `read` and `write` are {@link Locker}s sharing one
 * session (see {@link PostgresLocker} for keys, the session, waiting, fencing and close).
 *
 * - A reader holds `pg_try_advisory_lock_shared(id)`, a writer `pg_try_advisory_lock(id)`.
 * - **Ordering, honestly.** PostgreSQL queues blocking lock requests fairly, but this locker never
 *   blocks (it tries, and waits for a `NOTIFY`), and try-locks jump any queue: on their own, a
 *   stream of overlapping readers would starve a writer for ever. So a waiting writer marks the key
 *   (a shared advisory lock beside it) and readers from other sessions do not take the key while
 *   that mark is held; a reader that started waiting while no writer waited marks itself as ahead
 *   (another lock beside it) and writers from other sessions wait until it got in. That gives
 *   "no writer starvation" and "readers queued before a writer get in before it" across processes,
 *   to within a race between two markers taken at the same instant; it is not a strict FIFO. Within
 *   one locker (one session) the marks do not apply (a session's own locks never conflict with each
 *   other): waiters of one process are served as the lock core's counted mode serves them — each
 *   tries on its own, on a release notification or its safety-net poll.
 * - Leases of both kinds are kept alive and reported lost like locks; write leases can carry
 *   fencing tokens (`fencing` on a read lease is an {@link UnsupportedError}).
 * - Closing either view closes both (they share the session and the lease keeper).
 */
export class PostgresReadWriteLocker implements ReadWriteLocker {
  /** Shared (read) leases: many at once, none while a writer holds the key. */
  readonly read: Locker;
  /** Exclusive (write) leases. */
  readonly write: Locker;
  readonly #engine: LockCore<ResolvedPostgresLockerOptions>;

  /**
   * @param pool a `pg.Pool`, created, owned and ended by the caller.
   * @param options the locker's options (see {@link PostgresLockerOptions}; default prefix `"globallock:rw:"`).
   */
  constructor(pool: PostgresPool, options?: PostgresLockerOptions) {
    checkPool(pool);
    validateOptionsObject("options", options);
    const given: PostgresLockerOptions = { ...options };
    if (given.prefix === undefined) given.prefix = READ_WRITE_PREFIX;
    const resolved = resolvePostgresOptions(given);
    this.#engine = new LockCore(resolved, postgresBackend(pool, resolved, PERMITS), PERMITS);
    this.read = new ReadWriteView(this.#engine, false);
    this.write = new ReadWriteView(this.#engine, true);
  }

  /** Number of leases held now, read and write. */
  get heldCount(): number {
    return this.#engine.heldCount;
  }

  /** Number of callers (readers and writers) waiting in `lock` or `acquire`. */
  get waitingCount(): number {
    return this.#engine.waitingCount;
  }

  /** Closes both views: see `Locker.close`. Idempotent. */
  close(): Promise<void> {
    return this.#engine.close();
  }
}
