import { validateCount } from "../internal/validate.js";
import type { PooledLockerOptions, ResolvedPooledLockerOptions } from "../locker-options.js";
import { snapshotPooledOptions } from "../locker-options.js";
import { sqlName } from "../sql/sql-name.js";

/**
 * Options of {@link MySqlLocker}. Every one is optional; `undefined` means the default, `null` and
 * unknown names are rejected.
 */
export interface MySqlLockerOptions extends PooledLockerOptions {
  /**
   * The table fencing tokens come from (default `"globallock_fencing"`, optionally
   * database-qualified), created with `CREATE TABLE IF NOT EXISTS` on the first fenced acquisition.
   * Unqualified, it lives in the pool's default database.
   */
  fencingTable?: string | undefined;
  /**
   * The table where each lock connection records its locker's `owner` for `inspect` (default
   * `"globallock_owners"`, optionally database-qualified): one row per connection, written when the
   * connection is set up. Without the privilege to create or write it, holders show owner `""`.
   */
  ownerTable?: string | undefined;
  /**
   * How many pool connections the locker may use at once to hear releases of keys it waits for
   * (default `4`; `0`: none, waiters then only poll). Each blocks in `GET_LOCK(name, timeout)` on a
   * key held elsewhere; see {@link MySqlLocker}.
   */
  watchConnections?: number | undefined;
}

/**
 * {@link MySqlLockerOptions} with every default filled in and validated; `sweepConcurrency` is 1
 * (extension statements share the locker's one lock connection).
 */
export interface ResolvedMySqlLockerOptions extends ResolvedPooledLockerOptions {
  /** The table fencing tokens come from. */
  readonly fencingTable: string;
  /** The table of lock connections' owners. */
  readonly ownerTable: string;
  /** Connections that may wait in `GET_LOCK` at once to hear releases. */
  readonly watchConnections: number;
}

const OWN_OPTION_NAMES = ["fencingTable", "ownerTable", "watchConnections"] as const satisfies ReadonlyArray<
  keyof MySqlLockerOptions
>;

/** An identifier, optionally database-qualified: used in SQL as written. */
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63})?$/;

/** A table option's name (see {@link TABLE_NAME}), or `fallback`. */
function resolveTable(option: string, value: unknown, fallback: string): string {
  return sqlName(
    option,
    value,
    fallback,
    TABLE_NAME,
    "an SQL identifier, optionally database-qualified (such as globallock_fencing or locks.fencing)",
  );
}

/**
 * Validates `options` and fills in the defaults; each option is read exactly once. Throws
 * {@link InvalidArgumentError}.
 */
export function resolveMySqlOptions(options: unknown): ResolvedMySqlLockerOptions {
  const { given, resolved } = snapshotPooledOptions(options, OWN_OPTION_NAMES);
  const fencingTable = resolveTable("options.fencingTable", given.fencingTable, "globallock_fencing");
  const ownerTable = resolveTable("options.ownerTable", given.ownerTable, "globallock_owners");
  const watchConnections = given.watchConnections === undefined ? 4 : given.watchConnections;
  validateCount("options.watchConnections", watchConnections);
  return { ...resolved, fencingTable, ownerTable, watchConnections };
}
