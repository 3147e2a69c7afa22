import { performance } from "node:perf_hooks";
import { StoreUnavailableError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { checkOutWithin } from "../internal/pool-checkout.js";
import type { MySqlPool, MySqlPoolConnection } from "./types.js";

/** Why a session ended: its connection failed or ended, or it could not be confirmed in time. */
export type SessionEnd = "dropped" | "unconfirmed" | "retired";

/** A MySQL error after which the connection is still usable (the statement failed, not the session). */
export function isStatementError(error: unknown): boolean {
  const { fatal, errno } = error as { fatal?: unknown; errno?: unknown };
  return fatal !== true && typeof errno === "number";
}

/**
 * The locker's lock connection, checked out of the caller's pool: it holds every `GET_LOCK` the
 * locker takes and answers the extensions' `DO 1`. A statement that fails with anything but an
 * ordinary SQL error (a dropped connection, a timeout, a KILL, a restart) ends the session: the
 * connection is destroyed, never given back to the pool with a lock on it.
 */
export class Session {
  readonly connection: MySqlPoolConnection;
  /** The server's id of the connection (`CONNECTION_ID()`). */
  readonly id: number;
  /** `performance.now()` at which the latest statement that was answered had been sent. */
  confirmedAt = performance.now();
  /** The resource of each lease held on this session, by token. */
  readonly holds = new Map<string, string>();
  /**
   * Resources held or being tried on this session. `GET_LOCK` is re-entrant within a connection,
   * so a second try here would succeed: the backend asks only when the resource is not here.
   */
  readonly resources = new Set<string>();
  /** Whether this session's owner row was written (to delete it on retirement). */
  ownerWritten = false;
  #ended = false;
  /** The latest statement queued (settled or not). */
  #tail: Promise<unknown> = Promise.resolve();
  readonly #timeout: number;
  readonly #deadlines: DeadlineGroup;
  readonly #timeoutError = (): Error => new Error(`MySQL did not answer within ${this.#timeout} ms`);
  readonly #report: (session: Session, how: SessionEnd, cause: unknown) => void;
  readonly #onError = (error: Error): void => this.end("dropped", error);
  readonly #onEnd = (): void => this.end("dropped", new Error("the connection to MySQL ended"));

  constructor(
    connection: MySqlPoolConnection,
    timeout: number,
    ended: (session: Session, how: SessionEnd, cause: unknown) => void,
  ) {
    this.connection = connection;
    this.id = connection.connection.threadId ?? 0;
    this.#timeout = timeout;
    this.#deadlines = new DeadlineGroup(timeout, { inOrder: true });
    this.#report = ended;
    connection.connection.on("error", this.#onError);
    connection.connection.on("end", this.#onEnd);
  }

  /** True once the session ended (dropped, unconfirmed or retired). */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Runs one statement with the session's timeout (counted from when it is sent) and returns its
   * result (rows, or a result header). An ordinary SQL error is thrown as is; any other failure
   * ends the session first.
   */
  query<R>(sql: string, values?: unknown[]): Promise<R> {
    const run = this.#tail.then(() => this.#send<R>(sql, values));
    this.#tail = run.catch(ignore);
    return run;
  }

  async #send<R>(sql: string, values: unknown[] | undefined): Promise<R> {
    if (this.#ended) throw new Error("the locker's MySQL connection has ended");
    const sentAt = performance.now();
    try {
      const [result] = await this.#deadlines.run(this.connection.query(sql, values), this.#timeoutError);
      if (sentAt > this.confirmedAt) this.confirmedAt = sentAt;
      return result as R;
    } catch (error) {
      if (!isStatementError(error)) this.end("dropped", error);
      throw error;
    }
  }

  /**
   * Ends the session once: detaches from the connection and destroys it (the server then frees
   * its locks), unless `how` is `"retired"` (cleaned up first): then it goes back to the pool.
   */
  end(how: SessionEnd, cause: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    const core = this.connection.connection;
    core.removeListener("end", this.#onEnd);
    core.removeListener("error", this.#onError);
    // Errors after the end (a late socket error) must not crash the process.
    core.on("error", ignore);
    try {
      if (how === "retired") this.connection.release();
      else this.connection.destroy();
    } catch {
      // gone already
    }
    this.#report(this, how, cause);
  }

  /**
   * Cleans the session up (no user lock left, the server's idle timeout and owner row back as
   * they were) and gives it back to the pool; destroys it instead if that fails.
   */
  async retire(ownerTable: string): Promise<void> {
    if (this.#ended) return;
    try {
      await this.query("DO RELEASE_ALL_LOCKS()");
      await this.query("SET SESSION wait_timeout = @@GLOBAL.wait_timeout");
      if (this.ownerWritten) {
        await this.query(`DELETE FROM ${ownerTable} WHERE connection_id = ?`, [this.id]).catch(ignore);
      }
      if (this.#ended) return;
      this.end("retired", undefined);
    } catch (error) {
      this.end("dropped", error);
    }
  }
}

/**
 * Checks a connection out of `pool`, waiting at most `timeout` ms; a connection that arrives
 * later goes straight back. Failures are a StoreUnavailableError naming `resource`.
 */
export async function checkOut(pool: MySqlPool, timeout: number, resource: string): Promise<MySqlPoolConnection> {
  try {
    return await checkOutWithin(pool.getConnection(), timeout, "MySQL");
  } catch (error) {
    throw new StoreUnavailableError(resource, `MySQL is unavailable: ${messageOf(error)}`, { cause: error });
  }
}

/** A statement on `resource` failed: a StoreUnavailableError with the error as its cause. */
export function unavailable(resource: string, error: unknown): StoreUnavailableError {
  return new StoreUnavailableError(resource, `MySQL failed on "${resource}": ${messageOf(error)}`, { cause: error });
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function ignore(): void {}
