import { type Cancel, cancelledError } from "./dialect.js";
import type { Answers, Plan, Step } from "./plans.js";

/** How often a transaction the server aborted (a deadlock, a lock wait timeout, …) is run again. */
const RETRIES = 3;

/** Where a pooled connection reports a socket error. */
export interface ErrorEvents {
  /** Listens for the connection's failure. */
  on(event: "error", listener: (error: Error) => void): unknown;
  /** Removes a listener added with `on`. */
  removeListener(event: "error", listener: (error: Error) => void): unknown;
}

/**
 * What differs between the pools a table dialect runs its plans on (`pg`, `mysql2`): how a
 * connection is borrowed, sent a statement of the transaction's own, given back or ended, and
 * which errors leave it usable. One constant per pool library.
 */
export interface PoolDriver<Pool, Connection> {
  /** The statement that opens a transaction. */
  readonly begin: string;
  /** Borrows a connection of `pool` (waiting while the pool is exhausted). */
  connect(pool: Pool): Promise<Connection>;
  /** Where `connection` reports a socket error. */
  events(connection: Connection): ErrorEvents;
  /** Sends `sql`, a statement without values (`begin`, `COMMIT`, `ROLLBACK`). */
  query(connection: Connection, sql: string): Promise<unknown>;
  /** Gives `connection` back to its pool for reuse. */
  release(connection: Connection): void;
  /** Ends `connection` (its pool forgets it); `cause` is why. */
  destroy(connection: Connection, cause: Error): void;
  /** Whether `error` is the server's answer to one statement: the connection is fine. */
  isStatementError(error: unknown): boolean;
  /** Whether `error` aborted a transaction that may simply be run again. */
  isRetryable(error: unknown): boolean;
}

/**
 * A table dialect on the caller's pool of a server (PostgreSQL, MySQL): a plan runs on one
 * borrowed connection, in a transaction when asked, and that connection goes back to the pool
 * after, or is ended when it failed or the plan was cancelled. A subclass sends the steps.
 */
export abstract class PooledDialect<Pool, Connection> {
  /** The caller's pool: lockers on the same one hear each other's releases. */
  readonly database: Pool;
  readonly #driver: PoolDriver<Pool, Connection>;

  protected constructor(pool: Pool, driver: PoolDriver<Pool, Connection>) {
    this.database = pool;
    this.#driver = driver;
  }

  /** Runs `plan` on one connection (see `TableDialect.run`); an aborted transaction is run again. */
  async run<T>(plan: () => Plan<T>, transactional: boolean, cancel: Cancel): Promise<T> {
    const driver = this.#driver;
    for (let round = 1; ; round++) {
      const connection = await driver.connect(this.database);
      // A socket error between two statements would otherwise be an unhandled 'error' event. A
      // connection destroyed keeps the listener: its socket may still report one.
      driver.events(connection).on("error", ignore);
      let destroyed = false;
      const destroy = (cause: Error = cancelledError()): void => {
        if (destroyed) return;
        destroyed = true;
        driver.destroy(connection, cause);
      };
      cancel.onCancel = destroy;
      try {
        if (cancel.cancelled) throw cancelledError();
        if (transactional) await driver.query(connection, driver.begin);
        const steps = plan();
        let next = steps.next();
        while (!next.done) next = steps.next(await this.step(connection, next.value));
        if (transactional) await driver.query(connection, "COMMIT");
        cancel.onCancel = undefined;
        if (!destroyed) {
          driver.events(connection).removeListener("error", ignore);
          driver.release(connection);
        }
        return next.value;
      } catch (error) {
        cancel.onCancel = undefined;
        if (!destroyed) {
          // A statement that failed leaves the connection usable; anything else ends it.
          const usable = driver.isStatementError(error) && (!transactional || (await rollBack(driver, connection)));
          if (usable) {
            driver.events(connection).removeListener("error", ignore);
            driver.release(connection);
          } else destroy(error instanceof Error ? error : new Error(String(error)));
        }
        if (round <= RETRIES && !cancel.cancelled && driver.isRetryable(error)) continue;
        throw error;
      }
    }
  }

  /** Nothing to end: the pool is the caller's. */
  close(): void {}

  /** Sends one step of a plan on `connection` and answers it. */
  protected abstract step(connection: Connection, step: Step): Promise<Answers[Step["op"]]>;
}

/** Rolls the transaction on `connection` back; false when that failed too (the connection is done). */
async function rollBack<Connection>(driver: PoolDriver<unknown, Connection>, connection: Connection): Promise<boolean> {
  try {
    await driver.query(connection, "ROLLBACK");
    return true;
  } catch {
    return false;
  }
}

function ignore(): void {}
