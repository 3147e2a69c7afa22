import { LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import type { Finding } from "../deployment/finding.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { CoreSemaphore } from "../lockers/core-semaphore.js";
import { CoreReadWriteLocker, READ_WRITE_PERMITS } from "../lockers/read-write-views.js";
import { splitSemaphoreOptions } from "../lockers/semaphore-options.js";
import { semaphoreFencingRefusal } from "../sql/semaphore-options.js";
import type { TableDialect } from "./dialect.js";
import type { ResolvedTableLockerOptions, TableLockerOptions } from "./options.js";
import { tableBackend } from "./table-backend.js";
import {
  readWriteStore,
  TABLE_LOCK_PREFIX,
  TABLE_READ_WRITE_PREFIX,
  TABLE_SEMAPHORE_PREFIX,
  type TableSemaphoreOptions,
  type TableStore,
  tableKind,
  tableParts,
} from "./table-parts.js";

/**
 * What sets one table store's lockers apart from another's (one constant per store): its name,
 * the dialect it speaks on the database it is given, and its deployment check.
 */
export interface TableStoreSpec<Database, Dialect extends TableDialect> {
  /** The store, as diagnostics messages name it. */
  readonly name: TableStore;
  /**
   * Checks `database` (an InvalidArgumentError naming what was passed, before any option is
   * read) and returns how to make its dialect for a table.
   */
  dialectOf(database: unknown): (table: string) => Dialect;
  /** The deployment check of the lockers on `database`, whose statements run on `dialect`. */
  check(database: Database, dialect: Dialect): Promise<Finding[]>;
}

/**
 * The spec of a store on the caller's pool: `checkPool` refuses anything else, then each locker
 * makes a `Dialect` of the pool for its table.
 */
export function poolStore<Pool, Dialect extends TableDialect>(
  name: TableStore,
  checkPool: (pool: unknown) => asserts pool is Pool,
  PoolDialect: new (pool: Pool, table: string) => Dialect,
  check: (pool: Pool) => Promise<Finding[]>,
): TableStoreSpec<Pool, Dialect> {
  return {
    name,
    dialectOf(pool) {
      checkPool(pool);
      return (table) => new PoolDialect(pool, table);
    },
    check,
  };
}

/**
 * The {@link Locker} every table store shares (`PostgresTableLocker`, `MySqlTableLocker`,
 * `SqliteLocker`): a store's class names its database's type and passes its {@link TableStoreSpec}.
 */
export abstract class TableLocker<
  Database,
  Dialect extends TableDialect,
> extends CoreLocker<ResolvedTableLockerOptions> {
  /**
   * @param store the store's name, dialect and deployment check.
   * @param database the caller's pool, database or path, as the store takes it.
   * @param options see {@link TableLockerOptions}.
   */
  protected constructor(store: TableStoreSpec<Database, Dialect>, database: Database, options?: TableLockerOptions) {
    const { resolved, dialect } = tableParts(options, TABLE_LOCK_PREFIX, store.dialectOf(database));
    super(new LockCore(resolved, tableBackend(dialect, resolved, 1)), tableKind(store.name, "lock"));
    attachDeploymentCheck([this], () => store.check(database, dialect));
  }
}

/**
 * The counting semaphore every table store shares (see {@link TableLocker}). `fencing: true` is an
 * UnsupportedError unless `limit` is 1.
 */
export abstract class TableSemaphore<
  Database,
  Dialect extends TableDialect,
> extends CoreSemaphore<ResolvedTableLockerOptions> {
  /**
   * @param store the store's name, dialect and deployment check.
   * @param database the caller's pool, database or path, as the store takes it.
   * @param options the locker's options (default prefix `"globallock:semaphore:"`) and `limit`.
   */
  protected constructor(store: TableStoreSpec<Database, Dialect>, database: Database, options: TableSemaphoreOptions) {
    const makeDialect = store.dialectOf(database);
    const { limit, rest } = splitSemaphoreOptions(options);
    const { resolved, dialect } = tableParts(rest, TABLE_SEMAPHORE_PREFIX, makeDialect);
    super(resolved, tableBackend(dialect, resolved, limit), limit, tableKind(store.name, "semaphore"));
    attachDeploymentCheck([this], () => store.check(database, dialect));
  }

  /** @internal */
  protected fencingRefusal(): string {
    return semaphoreFencingRefusal(this.limit);
  }
}

/**
 * The read-write locker every table store shares (see {@link TableLocker}): both views on one
 * backend counting {@link READ_WRITE_PERMITS} per key. Closing either view closes both.
 */
export abstract class TableReadWriteLocker<
  Database,
  Dialect extends TableDialect,
> extends CoreReadWriteLocker<ResolvedTableLockerOptions> {
  /**
   * @param store the store's name, dialect and deployment check.
   * @param database the caller's pool, database or path, as the store takes it.
   * @param options see {@link TableLockerOptions} (default prefix `"globallock:rw:"`).
   */
  protected constructor(store: TableStoreSpec<Database, Dialect>, database: Database, options?: TableLockerOptions) {
    const { resolved, dialect } = tableParts(options, TABLE_READ_WRITE_PREFIX, store.dialectOf(database));
    super(resolved, tableBackend(dialect, resolved, READ_WRITE_PERMITS), readWriteStore(store.name));
    attachDeploymentCheck([this, this.read, this.write], () => store.check(database, dialect));
  }
}
