import { LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkMySql } from "../deployment/mysql.js";
import { validateOptionsObject } from "../internal/validate.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { checkMySqlPool } from "../sql/pool-checks.js";
import { mySqlBackend } from "./mysql-backend.js";
import { type MySqlLockerOptions, type ResolvedMySqlLockerOptions, resolveMySqlOptions } from "./options.js";
import type { MySqlPool } from "./types.js";

/**
 * A {@link Locker} on MySQL or MariaDB user-level locks (`GET_LOCK`), through a `mysql2/promise`
 * pool the caller creates, owns and ends. The pool's connections need a default database where
 * the locker may create its two small tables (fencing counters, lock connections' owners).
 *
 * - **Keys.** A key's lock is `GET_LOCK(name, 0)` where `name` is the SHA-256 of `prefix + key` in
 *   base64url (43 characters; the server takes at most 64). Two keys whose names collided would
 *   share one lock: they would exclude each other, never let two holders into one key.
 * - **One connection.** The locker checks one connection out of the pool on its first call and
 *   keeps it: it holds every lock the locker takes; while leases are held it is confirmed (one
 *   `DO 1` per batch of leases) every lease / 2 at the latest. A lock lives as long as that
 *   connection, so a dropped connection (`KILL`, a server restart, a proxy or network cut) loses
 *   every lock on it: each lease's `lost` aborts and `onLockLost` is called, and the next call
 *   checks out a new connection. Its `wait_timeout` is set to `expiry`, so a frozen holder's locks
 *   are freed by the server. The connection goes back to the pool only with no lock on it
 *   (`RELEASE_ALL_LOCKS()` first); otherwise it is destroyed.
 * - **Waiting.** MySQL has no LISTEN/NOTIFY. A waiter makes single `GET_LOCK(name, 0)` attempts on
 *   the lock connection; while a key is held by another connection, one probe connection per key
 *   (at most `watchConnections`, default 4) blocks in `GET_LOCK(name, 30)`, gives the lock back the
 *   moment the server grants it and wakes the waiters here, and is cancelled with `KILL QUERY`
 *   once nobody here waits. The jittered backoff (50 ms to 1 s) is the safety net. In one locker,
 *   waiters of a key queue FIFO and only the head asks (the lock core's wait loop).
 * - **Fencing.** `acquire(…, { fencing: true })` bumps the key's counter row (`fencingTable`)
 *   on the lock connection right after `GET_LOCK` succeeded, so only while the lock is held.
 * - **Counted locks.** A `GET_LOCK` lock has one holder: `MySqlSemaphore` counts permits with one
 *   lock per permit (slots); there is no MySQL read-write locker. `handOff`/`adopt` are
 *   unsupported (a lock belongs to its connection).
 * - **Close.** `close()` rejects waiters, cancels probes and, once no lease is held, gives the
 *   connection back clean. Leases still held keep it until they are released or, at the latest,
 *   `expiry` after `close()`, when it is destroyed (the server frees its locks).
 * - **Diagnostics** (kind `"mysql-lock"`; see `diagnostics.ts`): as {@link PostgresLocker}.
 */
export class MySqlLocker extends CoreLocker<ResolvedMySqlLockerOptions> {
  /**
   * @param pool a `mysql2/promise` `Pool` (or anything with its `getConnection()`), created, owned
   *   and ended by the caller. The locker checks one connection out of it while it runs, and one
   *   more per key it waits for (see `watchConnections`).
   * @param options see {@link MySqlLockerOptions}.
   */
  constructor(pool: MySqlPool, options?: MySqlLockerOptions) {
    checkMySqlPool(pool);
    validateOptionsObject("options", options);
    const resolved = resolveMySqlOptions(options);
    super(new LockCore(resolved, mySqlBackend(pool, resolved)), "mysql-lock");
    attachDeploymentCheck([this], () => checkMySql(pool));
  }
}
