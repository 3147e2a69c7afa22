/**
 * The pool arguments of the SQL lockers (session locks and table lockers alike), checked before
 * anything else: an InvalidArgumentError naming what was passed.
 */
import { InvalidArgumentError } from "../errors.js";
import type { MySqlPool } from "../mysql/types.js";
import type { PostgresPool } from "../postgres/types.js";

/** Checks the pool argument of a PostgreSQL locker: a `pg.Pool` (anything with `connect()`). */
export function checkPostgresPool(pool: unknown): asserts pool is PostgresPool {
  if (typeof (pool as { connect?: unknown } | null | undefined)?.connect !== "function") {
    throw new InvalidArgumentError("pool", "a pg Pool (an object with a connect() method)", pool);
  }
}

/** Checks the pool argument of a MySQL locker: a `mysql2/promise` pool (anything with `getConnection()`). */
export function checkMySqlPool(pool: unknown): asserts pool is MySqlPool {
  if (typeof (pool as { getConnection?: unknown } | null | undefined)?.getConnection !== "function") {
    throw new InvalidArgumentError("pool", "a mysql2/promise Pool (an object with a getConnection() method)", pool);
  }
}
