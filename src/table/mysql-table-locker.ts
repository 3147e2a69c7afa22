import { checkMySqlTable } from "../deployment/table.js";
import type { MySqlPool } from "../mysql/types.js";
import { checkMySqlPool } from "../sql/pool-checks.js";
import { MySqlDialect } from "./mysql-dialect.js";
import type { TableLockerOptions } from "./options.js";
import { poolStore, TableLocker, TableReadWriteLocker, TableSemaphore } from "./table-lockers.js";
import type { TableSemaphoreOptions } from "./table-parts.js";

/** A `mysql2/promise` pool (checked first: an InvalidArgumentError naming what was passed) as a table store. */
const MYSQL_TABLE = poolStore("mysql-table", checkMySqlPool, MySqlDialect, checkMySqlTable);

/**
 * A {@link Locker} on a MySQL 8 or MariaDB 10.3+ lease table (their `AUTO_INCREMENT` counters
 * survive a restart, which keeps fencing tokens rising), through a `mysql2/promise` pool the
 * caller creates, owns and ends — directly or through a multiplexing proxy (ProxySQL, RDS Proxy):
 * no `GET_LOCK`, no session variable, client-side placeholders only. The pool's connections need a
 * default database where the locker may create its two tables (see `createTable`).
 *
 * Rows, steps, waiting, fencing, loss, hand-off and close work as on PostgreSQL (see
 * `PostgresTableLocker`): an attempt is one short InnoDB transaction that locks the key's row in
 * `<table>_keys` (an upsert), reads and decides; a transaction InnoDB aborts for a deadlock is run
 * again. Without `RETURNING`, an extension is two statements (the update, then a read of which rows
 * it renewed) and a release up to three (the row's delete, an expired row's, the key row's).
 */
export class MySqlTableLocker extends TableLocker<MySqlPool, MySqlDialect> {
  /**
   * @param pool a `mysql2/promise` pool, created, owned and ended by the caller.
   * @param options see {@link TableLockerOptions}.
   */
  constructor(pool: MySqlPool, options?: TableLockerOptions) {
    super(MYSQL_TABLE, pool, options);
  }
}

/**
 * A counting semaphore on a MySQL or MariaDB lease table (see {@link MySqlTableLocker} and
 * `PostgresTableSemaphore`): at most `limit` permits of a key at once, waiters served in arrival
 * order across processes. `fencing: true` is an UnsupportedError unless `limit` is 1.
 */
export class MySqlTableSemaphore extends TableSemaphore<MySqlPool, MySqlDialect> {
  /**
   * @param pool a `mysql2/promise` pool, created, owned and ended by the caller.
   * @param options the locker's options (default prefix `"globallock:semaphore:"`) and `limit`.
   */
  constructor(pool: MySqlPool, options: TableSemaphoreOptions) {
    super(MYSQL_TABLE, pool, options);
  }
}

/**
 * Read-write locks on a MySQL or MariaDB lease table (see {@link MySqlTableLocker} and
 * `PostgresTableReadWriteLocker`): many readers or one writer per key, a waiting writer ahead of
 * the readers that came after it. Write leases can carry fencing tokens. Closing either view
 * closes both.
 */
export class MySqlTableReadWriteLocker extends TableReadWriteLocker<MySqlPool, MySqlDialect> {
  /**
   * @param pool a `mysql2/promise` pool, created, owned and ended by the caller.
   * @param options see {@link TableLockerOptions} (default prefix `"globallock:rw:"`).
   */
  constructor(pool: MySqlPool, options?: TableLockerOptions) {
    super(MYSQL_TABLE, pool, options);
  }
}
