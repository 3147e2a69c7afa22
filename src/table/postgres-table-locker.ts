import { checkPostgresTable } from "../deployment/table.js";
import type { PostgresPool } from "../postgres/types.js";
import { checkPostgresPool } from "../sql/pool-checks.js";
import type { TableLockerOptions } from "./options.js";
import { PostgresDialect } from "./postgres-dialect.js";
import { poolStore, TableLocker, TableReadWriteLocker, TableSemaphore } from "./table-lockers.js";
import type { TableSemaphoreOptions } from "./table-parts.js";

/** A `pg.Pool` (checked first: an InvalidArgumentError naming what was passed) as a table store. */
const POSTGRES_TABLE = poolStore("postgres-table", checkPostgresPool, PostgresDialect, checkPostgresTable);

/**
 * A {@link Locker} on a PostgreSQL lease table (Symfony's PdoStore), through a `pg.Pool` the
 * caller creates, owns and ends — directly or through a transaction pooler (PgBouncer
 * `pool_mode=transaction`, Supavisor, RDS Proxy), since nothing outlives a transaction: no session
 * lock, no session setting, no prepared statement by name, no LISTEN. (PgBouncer's statement mode
 * refuses transactions, which an attempt is.)
 *
 * - **Rows.** A lease is a row of the table (`options.table`, default `globallock_leases`): the
 *   key's name (`prefix + key`), a random token, the `owner`, the weight, and an expiry on the
 *   server's clock, compared only on the server (a step of that clock moves every expiry). A
 *   lease's validity here counts from when its statement was sent (this process's monotonic
 *   clock, less 1% for drift), so neither clock is compared with the other. The tables are created
 *   at the first use if missing (`createTable: false` to skip). Rows of a holder that died stay
 *   until the key is next used (an attempt deletes the expired rows it reads).
 * - **Steps.** An attempt is one short transaction: it locks the key's row in `<table>_keys`,
 *   reads the key's rows, deletes the expired ones, and inserts or renews its own. Extending (one
 *   statement per batch of 256 leases), releasing, adopting and reading are one statement each.
 * - **Waiting.** A waiter polls. There is no wake-up across processes: LISTEN/NOTIFY does not pass
 *   a transaction pooler, and a table cannot notify; lockers of this process on the same pool and
 *   table wake each other at once on release. A lock's waiter polls on a jittered backoff
 *   (`backoff`, 50 ms doubling to 1 s), never past the holder's expiry (the attempt reads it); a
 *   semaphore's or read-write lock's waiter every `backoff.max`. A waiter that missed leaves a row
 *   in the key's queue, renewed by each poll (a read and an update, without the key's lock) and
 *   gone three `backoff.max` after its last: waiters are served in arrival order across
 *   processes, and a `tryLock` never jumps the queue.
 * - **Fencing.** `acquire(…, { fencing: true })` returns the lease row's id: rows are numbered as
 *   they are made and a key's rows hold in that order, so tokens rise with every grant of a key.
 * - **Loss.** A lease whose row is gone or expired at an extension (deleted by hand, taken over
 *   after this process stalled past its expiry) is lost (`"taken"`).
 * - **Hand-off.** `handOff`/`adopt` work: adopting gives the row a fresh token (same id, so the
 *   same fencing token).
 * - **Close.** `close()` rejects waiters and stops extending; held rows expire within `expiry`
 *   unless released (releases still work). It never ends the caller's pool.
 */
export class PostgresTableLocker extends TableLocker<PostgresPool, PostgresDialect> {
  /**
   * @param pool a `pg.Pool` (or anything with its `connect()`), created, owned and ended by the caller.
   * @param options see {@link TableLockerOptions}.
   */
  constructor(pool: PostgresPool, options?: TableLockerOptions) {
    super(POSTGRES_TABLE, pool, options);
  }
}

/**
 * A counting semaphore on a PostgreSQL lease table (see {@link PostgresTableLocker}): at most
 * `limit` permits of a key are held at once, across every process using the table. A key's rows
 * are one queue: a row holds when its weight and the weights before it fit the limit, so waiters
 * are served in arrival order and a heavy one is never overtaken by lighter ones behind it.
 * `fencing: true` is an UnsupportedError unless `limit` is 1.
 */
export class PostgresTableSemaphore extends TableSemaphore<PostgresPool, PostgresDialect> {
  /**
   * @param pool a `pg.Pool`, created, owned and ended by the caller.
   * @param options the locker's options (default prefix `"globallock:semaphore:"`) and `limit`.
   */
  constructor(pool: PostgresPool, options: TableSemaphoreOptions) {
    super(POSTGRES_TABLE, pool, options);
  }
}

/**
 * Read-write locks on a PostgreSQL lease table (see {@link PostgresTableLocker}): per key, many
 * readers or one writer. A reader's row weighs one permit, a writer's all of them, in one queue:
 * readers queued before a writer get in together before it, readers arriving after a waiting
 * writer wait behind it. Write leases can carry fencing tokens. Closing either view closes both.
 */
export class PostgresTableReadWriteLocker extends TableReadWriteLocker<PostgresPool, PostgresDialect> {
  /**
   * @param pool a `pg.Pool`, created, owned and ended by the caller.
   * @param options see {@link TableLockerOptions} (default prefix `"globallock:rw:"`).
   */
  constructor(pool: PostgresPool, options?: TableLockerOptions) {
    super(POSTGRES_TABLE, pool, options);
  }
}
