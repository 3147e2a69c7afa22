import { LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkMySqlTable } from "../deployment/table.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { CoreSemaphore } from "../lockers/core-semaphore.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS } from "../lockers/read-write-views.js";
import type { MySqlPool } from "../mysql/types.js";
import { checkMySqlPool } from "../sql/pool-checks.js";
import { semaphoreFencingRefusal } from "../sql/semaphore-options.js";
import { MySqlDialect } from "./mysql-dialect.js";
import type { ResolvedTableLockerOptions, TableLockerOptions } from "./options.js";
import { tableBackend } from "./table-backend.js";
import {
  readWriteStore,
  semaphoreParts,
  TABLE_LOCK_PREFIX,
  TABLE_READ_WRITE_PREFIX,
  TABLE_SEMAPHORE_PREFIX,
  type TableSemaphoreOptions,
  tableKind,
  tableParts,
} from "./table-parts.js";

/** The dialect of a `mysql2/promise` pool (checked first: an InvalidArgumentError naming what was passed). */
function dialectOf(pool: unknown): (table: string) => MySqlDialect {
  checkMySqlPool(pool);
  return (table) => new MySqlDialect(pool, table);
}

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
export class MySqlTableLocker extends CoreLocker<ResolvedTableLockerOptions> {
  /**
   * @param pool a `mysql2/promise` pool, created, owned and ended by the caller.
   * @param options see {@link TableLockerOptions}.
   */
  constructor(pool: MySqlPool, options?: TableLockerOptions) {
    const { resolved, dialect } = tableParts(options, TABLE_LOCK_PREFIX, dialectOf(pool));
    super(new LockCore(resolved, tableBackend(dialect, resolved, 1)), tableKind("mysql-table", "lock"));
    attachDeploymentCheck([this], () => checkMySqlTable(pool));
  }
}

/**
 * A counting semaphore on a MySQL or MariaDB lease table (see {@link MySqlTableLocker} and
 * `PostgresTableSemaphore`): at most `limit` permits of a key at once, waiters served in arrival
 * order across processes. `fencing: true` is an UnsupportedError unless `limit` is 1.
 */
export class MySqlTableSemaphore extends CoreSemaphore<ResolvedTableLockerOptions> {
  /**
   * @param pool a `mysql2/promise` pool, created, owned and ended by the caller.
   * @param options the locker's options (default prefix `"globallock:semaphore:"`) and `limit`.
   */
  constructor(pool: MySqlPool, options: TableSemaphoreOptions) {
    const makeDialect = dialectOf(pool);
    const { limit, rest } = semaphoreParts(options);
    const { resolved, dialect } = tableParts(rest, TABLE_SEMAPHORE_PREFIX, makeDialect);
    super(resolved, tableBackend(dialect, resolved, limit), limit, tableKind("mysql-table", "semaphore"));
    attachDeploymentCheck([this], () => checkMySqlTable(pool));
  }

  /** @internal */
  protected fencingRefusal(): string {
    return semaphoreFencingRefusal(this.limit);
  }
}

/**
 * Read-write locks on a MySQL or MariaDB lease table (see {@link MySqlTableLocker} and
 * `PostgresTableReadWriteLocker`): many readers or one writer per key, a waiting writer ahead of
 * the readers that came after it. Write leases can carry fencing tokens. Closing either view
 * closes both.
 */
export class MySqlTableReadWriteLocker extends CoreReadWriteLocker<ResolvedTableLockerOptions> {
  /**
   * @param pool a `mysql2/promise` pool, created, owned and ended by the caller.
   * @param options see {@link TableLockerOptions} (default prefix `"globallock:rw:"`).
   */
  constructor(pool: MySqlPool, options?: TableLockerOptions) {
    const { resolved, dialect } = tableParts(options, TABLE_READ_WRITE_PREFIX, dialectOf(pool));
    super(resolved, tableBackend(dialect, resolved, READ_WRITE_PERMITS), readWriteStore("mysql-table"));
    attachDeploymentCheck([this, this.read, this.write], () => checkMySqlTable(pool));
  }
}
