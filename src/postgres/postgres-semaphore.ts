import { checkPostgres } from "../deployment/postgres.js";
import { checkPostgresPool } from "../sql/pool-checks.js";
import { SessionSemaphore, type SessionSemaphoreStore } from "../sql/session-semaphore.js";
import { type PostgresLockerOptions, type ResolvedPostgresLockerOptions, resolvePostgresOptions } from "./options.js";
// Referenced from doc comments only.
import type { PostgresLocker } from "./postgres-locker.js";
import { postgresSemaphoreBackend } from "./semaphore-backend.js";
import type { PostgresPool } from "./types.js";

/** Options of {@link PostgresSemaphore}: a {@link PostgresLocker}'s options plus the number of permits per key. */
export interface PostgresSemaphoreOptions extends PostgresLockerOptions {
  /**
   * Permits per key (required): a positive safe integer, at most {@link MAX_POSTGRES_PERMITS}.
   * Every semaphore using a key must pass the same limit (the slots of a key depend on it).
   */
  limit: number;
}

/** The default `prefix` of a {@link PostgresSemaphore}: its lock ids never meet locks'. */
export const POSTGRES_SEMAPHORE_PREFIX = "globallock:semaphore:";

/**
 * The largest `limit` of a {@link PostgresSemaphore}: each permit held is one advisory lock in the
 * server's shared lock table (`max_locks_per_transaction` × `max_connections` entries, 6,400 by
 * default, shared with every other lock), and a miss may try every slot.
 */
export const MAX_POSTGRES_PERMITS = 10_000;

/** How {@link PostgresSemaphore} is made (see `SessionSemaphore`). */
const POSTGRES_SEMAPHORES: SessionSemaphoreStore<PostgresPool, ResolvedPostgresLockerOptions> = {
  kind: "postgres-semaphore",
  most: MAX_POSTGRES_PERMITS,
  prefix: POSTGRES_SEMAPHORE_PREFIX,
  checkPool: checkPostgresPool,
  resolve: resolvePostgresOptions,
  backend: postgresSemaphoreBackend,
  check: checkPostgres,
};

/**
 * A counting semaphore on PostgreSQL session advisory locks: at most `limit` permits of a key are
 * held at once, across every process using the same database. Advisory locks cannot count, so a
 * key has `limit` slots, each an advisory lock; a lease of weight `w` holds `w` of them, taken in
 * one statement (all or nothing). Sessions, leases, waiting, close and the pooler guard are
 * {@link PostgresLocker}'s (one connection per semaphore, leases as long as the session lives, so a
 * killed holder's permits come back at once; wake-ups by `NOTIFY`, a jittered backoff as the
 * safety net; `UnsupportedError` behind a transaction pooler).
 *
 * - **Order.** Within one semaphore, waiters of a key are served in arrival order. Across
 *   sessions, the first waiter of a key holds the key's gate (another advisory lock) while it
 *   waits, and no other session takes a permit meanwhile: a heavy waiter is never starved by a
 *   stream of light holders. Which of several waiting sessions gets the gate next is a race, not
 *   arrival order.
 * - **Fencing.** `fencing: true` is an UnsupportedError unless `limit` is 1; then tokens come
 *   from the locker's sequence, drawn in the statement that took the slot.
 * - **Limits.** `limit` at most {@link MAX_POSTGRES_PERMITS}: each permit held is one entry of the
 *   server's shared lock table. `handOff`/`adopt` are unsupported (a lock belongs to its session).
 */
export class PostgresSemaphore extends SessionSemaphore<PostgresPool, ResolvedPostgresLockerOptions> {
  /**
   * @param pool a `pg.Pool`, created, owned and ended by the caller (the semaphore checks one
   *   connection out of it; `waitingRooms` does not apply).
   * @param options the locker's options (default prefix {@link POSTGRES_SEMAPHORE_PREFIX}) and `limit`.
   */
  constructor(pool: PostgresPool, options: PostgresSemaphoreOptions) {
    super(pool, options, POSTGRES_SEMAPHORES);
  }
}
