import type { LockerKind } from "../diagnostics.js";
import { validateOptionsObject } from "../internal/validate.js";
import type { ReadWriteStore } from "../lockers/read-write-views.js";
import { READ_WRITE_PERMITS } from "../lockers/read-write-views.js";
import type { TableDialect } from "./dialect.js";
import { type ResolvedTableLockerOptions, resolveTableOptions, type TableLockerOptions } from "./options.js";

/** The default `prefix` of a table locker. */
export const TABLE_LOCK_PREFIX = "globallock:";
/** The default `prefix` of a table semaphore: its keys never meet locks' keys. */
export const TABLE_SEMAPHORE_PREFIX = "globallock:semaphore:";
/** The default `prefix` of a table read-write locker: its keys never meet locks' keys. */
export const TABLE_READ_WRITE_PREFIX = "globallock:rw:";

/** Options of a table semaphore: the locker's options plus the number of permits per key. */
export interface TableSemaphoreOptions extends TableLockerOptions {
  /**
   * Permits per key (required): a positive safe integer. Every semaphore using a key must pass
   * the same limit (the table does not store it).
   */
  limit: number;
}

/** What a table locker's constructor makes of its arguments. */
export interface TableParts<Dialect extends TableDialect = TableDialect> {
  readonly resolved: ResolvedTableLockerOptions;
  readonly dialect: Dialect;
}

/**
 * Validates a table locker's options (`prefix` defaulting to `defaultPrefix`) and makes its
 * dialect for the resolved table. Throws InvalidArgumentError.
 */
export function tableParts<Dialect extends TableDialect>(
  options: unknown,
  defaultPrefix: string,
  dialectOf: (table: string) => Dialect,
): TableParts<Dialect> {
  validateOptionsObject("options", options);
  const resolved = resolveTableOptions(options, defaultPrefix);
  return { resolved, dialect: dialectOf(resolved.table) };
}

/** The table lockers of a database, as diagnostics messages name them. */
export type TableStore = "postgres-table" | "mysql-table" | "sqlite";

/** The diagnostics kind of a table locker (`"<store>-lock"`, `"<store>-semaphore"`). */
export function tableKind(store: TableStore, primitive: "lock" | "semaphore"): LockerKind {
  return `${store}-${primitive}`;
}

/** The read-write views of a table store (kinds `"<store>-read"` and `"<store>-write"`). */
export function readWriteStore(store: TableStore): ReadWriteStore {
  return { name: store, permits: READ_WRITE_PERMITS };
}
