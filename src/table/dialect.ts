import type { Plan } from "./plans.js";

/**
 * A plan's way out when it takes too long: the backend cancels it at its operation timeout, and
 * the dialect ends the connection the plan is using (so a statement that never answers does not
 * keep a pool's connection forever) and starts nothing more.
 */
export class Cancel {
  /** True once cancelled. */
  cancelled = false;
  /** What the dialect does on a cancel while it holds a connection. */
  onCancel: (() => void) | undefined;

  /** Cancels the plan (once). */
  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.onCancel?.();
  }
}

/** The error a dialect rejects with when it stops because its plan was cancelled. */
export function cancelledError(): Error {
  return new Error("the operation was cancelled at its timeout");
}

/** A database as the table backend uses it (see `plans.ts`): PostgreSQL, MySQL or SQLite. */
export interface TableDialect {
  /** The database's kind, in hand-off scopes and error messages: "postgres", "mysql" or "sqlite". */
  readonly kind: "postgres" | "mysql" | "sqlite";
  /**
   * What identifies the database in this process: the caller's pool, or an SQLite file's path.
   * Table lockers on the same one hear each other's releases (see `TableWatcher`).
   */
  readonly database: unknown;
  /**
   * Runs `plan` — in one transaction when `transactional`, else each step on its own — and
   * resolves to its result; a transaction the database aborted for a deadlock, or an SQLite
   * database busy with another process's write, is run again with a fresh plan. Rejects with the
   * database's error.
   */
  run<T>(plan: () => Plan<T>, transactional: boolean, cancel: Cancel): Promise<T>;
  /** Ends what the dialect opened itself (an SQLite database opened from a path); later runs reopen it. */
  close(): void;
}
