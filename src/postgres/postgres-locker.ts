import { LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkPostgres } from "../deployment/postgres.js";
import { validateOptionsObject } from "../internal/validate.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { checkPostgresPool } from "../sql/pool-checks.js";
import { type PostgresLockerOptions, type ResolvedPostgresLockerOptions, resolvePostgresOptions } from "./options.js";
import { postgresBackend } from "./postgres-backend.js";
import type { PostgresPool } from "./types.js";

/**
 * A {@link Locker} on PostgreSQL session advisory locks, through a `pg.Pool` the caller creates,
 * owns and ends.
 *
 * - **Keys.** A key's lock is `pg_try_advisory_lock(id)` where `id` is the first 64 bits of the
 *   SHA-256 of `prefix + key`. Two keys whose ids collide share one lock: they exclude each other
 *   (never two holders of one key). The odds are about n² / 2⁶⁵ for n keys held at once (10⁻⁸ for
 *   a million), so the locker does not check for it.
 * - **One connection.** The locker checks one connection out of the pool on its first call and
 *   keeps it: it holds every lock the locker takes (many keys on one session) and `LISTEN`s for
 *   releases; while leases are held it is confirmed (one `SELECT 1` per batch of leases) every
 *   lease / 2 at the latest. A lock lives as long as that session; so a dropped connection (killed
 *   backend, server restart, network failure) loses every lock on it: each lease's `lost` aborts
 *   and `onLockLost` is called, and the next call checks out a new connection. The session is
 *   asked to end after `expiry` idle (`idle_session_timeout`), so a frozen holder's locks are
 *   freed by the server.
 * - **Waiting.** A waiter makes single `pg_try_advisory_lock` attempts, marks its key as waited
 *   for (a shared advisory lock on the same 64 bits as two `int4`), and wakes on the `NOTIFY` a
 *   release sends when it finds a marker, or on a jittered backoff (50 ms to 1 s) as the safety net.
 *   In one locker, waiters of a key queue FIFO and only the head asks (the lock core's wait loop).
 *   Across lockers, a locker waiting for a key held elsewhere takes a place in the key's waiting
 *   room (one more pool connection, blocked in `pg_advisory_lock` on the room's own lock id; at
 *   most `waitingRooms` keys at once): only the locker whose place holds the room acts on a
 *   release, so lockers take turns in arrival order (see `WaitingRooms`).
 * - **Fencing.** `acquire(…, { fencing: true })` draws `nextval` of a sequence in the same
 *   statement that took the lock, only when it was taken.
 * - **Close.** `close()` rejects waiters and, once no lease is held, cleans the connection up
 *   (`UNLISTEN *`, no session lock left) and gives it back to the pool, keeping the locker's
 *   prepared statements (named `globallock_…`; `pg` remembers them per connection, so the next
 *   locker on it does not prepare them again). Leases still held keep it
 *   until they are released or, at the latest, `expiry` after `close()`, when it is destroyed.
 * - **Diagnostics** (kind `"postgres-lock"`; see `diagnostics.ts`): every call is traced on
 *   `globallock:acquire` (`attempts`: `pg_try_advisory_lock` statements sent); every release and
 *   lost lease is published; each confirmation of the session is one extend message per batch of
 *   auto-extended leases (`"extended"`), and one that failed is one message whose outcome is the
 *   leases' loss reason, with its error, before their lost messages.
 */
export class PostgresLocker extends CoreLocker<ResolvedPostgresLockerOptions> {
  /**
   * @param pool a `pg.Pool` (or anything with its `connect()`), created, owned and ended by the
   *   caller. The locker checks one connection out of it while it runs.
   * @param options see {@link PostgresLockerOptions}.
   */
  constructor(pool: PostgresPool, options?: PostgresLockerOptions) {
    checkPostgresPool(pool);
    validateOptionsObject("options", options);
    const resolved = resolvePostgresOptions(options);
    super(new LockCore(resolved, postgresBackend(pool, resolved)), "postgres-lock");
    attachDeploymentCheck([this], () => checkPostgres(pool));
  }
}
