import { checkMySql } from "../deployment/mysql.js";
import { checkMySqlPool } from "../sql/pool-checks.js";
import { SessionSemaphore, type SessionSemaphoreStore } from "../sql/session-semaphore.js";
// Referenced from doc comments only.
import type { MySqlLocker } from "./mysql-locker.js";
import { type MySqlLockerOptions, type ResolvedMySqlLockerOptions, resolveMySqlOptions } from "./options.js";
import { mySqlSemaphoreBackend } from "./semaphore-backend.js";
import type { MySqlPool } from "./types.js";

/** Options of {@link MySqlSemaphore}: a {@link MySqlLocker}'s options plus the number of permits per key. */
export interface MySqlSemaphoreOptions extends MySqlLockerOptions {
  /**
   * Permits per key (required): a positive safe integer, at most {@link MAX_MYSQL_PERMITS}. Every
   * semaphore using a key must pass the same limit (the slots of a key depend on it).
   */
  limit: number;
}

/** The default `prefix` of a {@link MySqlSemaphore}: its lock names never meet locks'. */
export const MYSQL_SEMAPHORE_PREFIX = "globallock:semaphore:";

/**
 * The largest `limit` of a {@link MySqlSemaphore}: an attempt tries the slots as the rows of a
 * recursive query, which MySQL 8 bounds at 1,000 (`cte_max_recursion_depth`), and each permit held
 * is one `GET_LOCK` lock on the server.
 */
export const MAX_MYSQL_PERMITS = 500;

/** How {@link MySqlSemaphore} is made (see `SessionSemaphore`). */
const MYSQL_SEMAPHORES: SessionSemaphoreStore<MySqlPool, ResolvedMySqlLockerOptions> = {
  kind: "mysql-semaphore",
  most: MAX_MYSQL_PERMITS,
  prefix: MYSQL_SEMAPHORE_PREFIX,
  checkPool: checkMySqlPool,
  resolve: resolveMySqlOptions,
  backend: mySqlSemaphoreBackend,
  check: checkMySql,
};

/**
 * A counting semaphore on MySQL (8.0 and later) or MariaDB (10.2.2 and later) user-level locks: at
 * most `limit` permits of a key are held at once, across every process using the same server. A
 * `GET_LOCK` lock has one holder, so a key has `limit` slots, each a lock (a connection may hold
 * several); a lease of weight `w` holds `w` of them, taken in one statement (all or nothing).
 * Connections, leases, close and the proxy guard are {@link MySqlLocker}'s (one lock connection per
 * semaphore, leases as long as it lives, so a killed holder's permits come back at once).
 *
 * - **Order.** Within one semaphore, waiters of a key are served in arrival order. Across
 *   connections, the first waiter of a key holds the key's gate (another `GET_LOCK` lock) while it
 *   waits, and no other connection takes a permit meanwhile: a heavy waiter is never starved by a
 *   stream of light holders. Which of several waiting lockers gets the gate next is a race.
 * - **Waking** (MySQL has no NOTIFY): one probe connection per key waited for (`watchConnections`)
 *   blocks in `GET_LOCK` on the gate, or, while this semaphore's waiter holds the gate, on a slot
 *   held elsewhere, and wakes the waiters here when the server grants it; a jittered backoff is the
 *   safety net.
 * - **Fencing.** `fencing: true` is an UnsupportedError unless `limit` is 1; then a counter row of
 *   the fencing table is bumped while the slot is held.
 * - `handOff`/`adopt` are unsupported (a lock belongs to its connection).
 */
export class MySqlSemaphore extends SessionSemaphore<MySqlPool, ResolvedMySqlLockerOptions> {
  /**
   * @param pool a `mysql2/promise` `Pool`, created, owned and ended by the caller. The semaphore
   *   checks one connection out of it, and one more per key it waits for (`watchConnections`).
   * @param options the locker's options (default prefix {@link MYSQL_SEMAPHORE_PREFIX}) and `limit`.
   */
  constructor(pool: MySqlPool, options: MySqlSemaphoreOptions) {
    super(pool, options, MYSQL_SEMAPHORES);
  }
}
