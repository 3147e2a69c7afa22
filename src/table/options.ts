import { InvalidArgumentError } from "../errors.js";
import { optionalBoolean } from "../internal/validate.js";
import type { ResolvedLockerOptions, ServerLockerOptions } from "../locker-options.js";
import { resolveServerOptions, snapshotServerOptions } from "../locker-options.js";
import { sqlName } from "../sql/sql-name.js";

/**
 * Options of the table lockers (`PostgresTableLocker`, `MySqlTableLocker`, `SqliteLocker`, and
 * their semaphores and read-write lockers). Every one is optional; `undefined` means the default,
 * `null` and unknown names are rejected.
 *
 * `expiry` is the lease row's lifetime on the database's clock: a holder that died or stopped is
 * taken over that long after its last extension, by a waiter that polls (see `backoff`).
 */
export interface TableLockerOptions extends ServerLockerOptions {
  /**
   * The lease table (default `"globallock_leases"`): a plain SQL identifier — a letter or `_`, then
   * letters, digits or `_`, at most 48 characters — used quoted, as written. PostgreSQL and MySQL
   * also use `<table>_keys`, one small row per key name that attempts lock while they decide.
   */
  table?: string | undefined;
  /** Creates the tables (and their indexes) if they are missing, at the first use (default `true`). */
  createTable?: boolean | undefined;
}

/** {@link TableLockerOptions} with every default filled in and validated. */
export interface ResolvedTableLockerOptions extends ResolvedLockerOptions {
  /** Prepended to every key: the row's `name` is the prefix and the key. */
  readonly prefix: string;
  /** The lease table. */
  readonly table: string;
  /** Whether the tables are created if missing. */
  readonly createTable: boolean;
}

/** The default lease table. */
export const DEFAULT_TABLE = "globallock_leases";

/** The longest prefix, in UTF-8 bytes: a row's name (prefix and key) fits MySQL's index. */
export const MAX_PREFIX_BYTES = 1024;

const OWN_OPTION_NAMES = ["backoff", "table", "createTable", "onLockLost"] as const satisfies ReadonlyArray<
  keyof TableLockerOptions
>;

/** A plain SQL identifier, short enough for its index names (`<table>_name`) on every dialect. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/**
 * Extension statements in flight at once: each extends up to 256 leases in one statement, so
 * this matters only for lockers holding thousands.
 */
const SWEEP_CONCURRENCY = 4;

/**
 * Validates `options` and fills in the defaults (`prefix` defaults to `defaultPrefix`); each option
 * is read exactly once. Throws `InvalidArgumentError` naming the option and the value.
 */
export function resolveTableOptions(options: unknown, defaultPrefix: string): ResolvedTableLockerOptions {
  const snapshot = snapshotServerOptions(options, OWN_OPTION_NAMES);
  const prefix = snapshot.given.prefix === undefined ? defaultPrefix : snapshot.prefix;
  if (Buffer.byteLength(prefix, "utf8") > MAX_PREFIX_BYTES) {
    throw new InvalidArgumentError("options.prefix", `a string of at most ${MAX_PREFIX_BYTES} UTF-8 bytes`, prefix);
  }
  const server = resolveServerOptions(snapshot, prefix, SWEEP_CONCURRENCY);
  const table = sqlName(
    "options.table",
    snapshot.given.table,
    DEFAULT_TABLE,
    IDENTIFIER,
    "a plain SQL identifier (a letter or _, then letters, digits or _, at most 48 characters)",
  );
  const createTable = optionalBoolean("options.createTable", snapshot.given.createTable, true);
  return { ...server, table, createTable };
}
