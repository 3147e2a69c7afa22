import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkPostgres } from "../deployment/postgres.js";
// Referenced from doc comments only.
import type { UnsupportedError } from "../errors.js";
import { validateOptionsObject } from "../internal/validate.js";
import type { Locker } from "../locker.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS, type ReadWriteStore } from "../lockers/read-write-views.js";
import { checkPostgresPool } from "../sql/pool-checks.js";
import { type PostgresLockerOptions, resolvePostgresOptions } from "./options.js";
import { postgresBackend } from "./postgres-backend.js";
import type { PostgresPool } from "./types.js";

/** The default `prefix` of a {@link PostgresReadWriteLocker}: its lock ids never collide with locks'. */
const READ_WRITE_PREFIX = "globallock:rw:";

/** PostgreSQL's read-write views. */
const POSTGRES: ReadWriteStore = { name: "postgres", permits: READ_WRITE_PERMITS };

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
export class PostgresReadWriteLocker extends CoreReadWriteLocker {
  /**
   * @param pool a `pg.Pool`, created, owned and ended by the caller.
   * @param options the locker's options (see {@link PostgresLockerOptions}; default prefix `"globallock:rw:"`).
   */
  constructor(pool: PostgresPool, options?: PostgresLockerOptions) {
    checkPostgresPool(pool);
    validateOptionsObject("options", options);
    const given: PostgresLockerOptions = { ...options };
    if (given.prefix === undefined) given.prefix = READ_WRITE_PREFIX;
    const resolved = resolvePostgresOptions(given);
    super(resolved, postgresBackend(pool, resolved, READ_WRITE_PERMITS), POSTGRES);
    attachDeploymentCheck([this, this.read, this.write], () => checkPostgres(pool));
  }
}
