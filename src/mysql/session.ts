import { performance } from "node:perf_hooks";
import { type StoreUnavailableError, UnsupportedError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { type SharingSign, sharedSessionError } from "../internal/shared-session.js";
import { newToken } from "../internal/token.js";
import type { SessionEnd } from "../sql/session-slot.js";
import { checkOutFor, statementFailed } from "../sql/sql-errors.js";
import type { MySqlPool, MySqlPoolConnection } from "./types.js";

/**
 * The user variable that names the locker session a server connection carries: a session claims
 * its connection with its random token, only where no other session's token is, and every
 * statement a held lock depends on acts only where the variable still holds that token (see
 * {@link sameSession}), answering whether it did in a `same` column. A user variable lives and dies
 * with the server connection, like a `GET_LOCK`: behind a proxy that multiplexes connections, a
 * statement that lands on another one touches nothing.
 */
const CLAIM = "@globallock_session";

/** SQL: whether this connection carries the session whose token is the next `?` placeholder. */
export const SAME_SESSION = `${CLAIM} <=> ?`;

/** The refusal of a locker whose connection is shared by a multiplexing proxy. */
export function proxyRefusal(sign: SharingSign, cause?: unknown): UnsupportedError {
  return sharedSessionError(
    "MySQL GET_LOCK locks",
    sign,
    "A proxy that multiplexes connections (ProxySQL with multiplexing on for the locker's queries, or any " +
      "transaction-level pooler) shares server connections between clients, so two of them could hold one lock. " +
      "Connect the locker's pool to MySQL directly, or keep a server connection per client for it (ProxySQL " +
      "turns multiplexing off for a connection that calls GET_LOCK: do not override that), or use a store that " +
      "does not depend on the connection (Redis, etcd, lock files).",
    cause,
  );
}

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
  /** The server's id of the connection (`CONNECTION_ID()`, read by {@link setUp}). */
  id: number;
  /** The token this session claims its connection with (see {@link CLAIM}). */
  readonly token = newToken();
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

  /** The locker's owner table, where this session's row is deleted on retirement. */
  readonly #ownerTable: string;

  constructor(
    connection: MySqlPoolConnection,
    timeout: number,
    ownerTable: string,
    ended: (session: Session, how: SessionEnd, cause: unknown) => void,
  ) {
    this.connection = connection;
    this.#ownerTable = ownerTable;
    this.id = connection.connection.threadId ?? 0;
    this.#timeout = timeout;
    this.#deadlines = new DeadlineGroup(timeout, { inOrder: true });
    this.#report = ended;
    connection.connection.on("error", this.#onError);
    connection.connection.on("end", this.#onEnd);
  }

  /** True once the session ended (dropped, unconfirmed, retired or moved). */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Asks the server to end the connection once idle for `idleS` seconds (freeing its locks) and
   * claims the connection (see {@link CLAIM}) in one statement, then reads the server's id of the
   * connection. Throws the proxy refusal (and ends the session) when another session claimed it.
   */
  async setUp(idleS: number): Promise<void> {
    await this.query(`SET SESSION wait_timeout = ?, ${CLAIM} = IF(COALESCE(${CLAIM}, '') = '', ?, ${CLAIM})`, [
      idleS,
      this.token,
    ]);
    const [row] = await this.query<Array<{ id: number }>>(
      `SELECT CONNECTION_ID() AS id, ${SAME_SESSION} AS same`,
      [this.token],
      "claimed",
    );
    this.id = Number(row?.id ?? this.id);
  }

  /** Confirms the session: its connection answers, and is still the session's own. */
  ping(): Promise<unknown> {
    return this.query(`SELECT ${SAME_SESSION} AS same`, [this.token]);
  }

  /**
   * Runs one statement with the session's timeout (counted from when it is sent) and returns its
   * result (rows, or a result header). An ordinary SQL error is thrown as is; any other failure
   * ends the session first. A statement whose first row answers `same = 0` ran on a connection
   * that is not the session's: the session ends as moved, and the proxy refusal is thrown.
   */
  query<R>(sql: string, values?: unknown[], sign: "claimed" | "moved" = "moved"): Promise<R> {
    const run = this.#tail.then(() => this.#send<R>(sql, values, sign));
    this.#tail = run.catch(ignore);
    return run;
  }

  async #send<R>(sql: string, values: unknown[] | undefined, sign: "claimed" | "moved"): Promise<R> {
    if (this.#ended) throw new Error("the locker's MySQL connection has ended");
    const sentAt = performance.now();
    let result: unknown;
    try {
      [result] = await this.#deadlines.run(this.connection.query(sql, values), this.#timeoutError);
    } catch (error) {
      if (!isStatementError(error)) this.end("dropped", error);
      throw error;
    }
    const first = Array.isArray(result) ? (result[0] as { same?: unknown } | undefined) : undefined;
    if (first !== undefined && "same" in first && Number(first.same) !== 1) {
      const refusal = proxyRefusal(sign);
      this.end("moved", refusal);
      throw refusal;
    }
    if (sentAt > this.confirmedAt) this.confirmedAt = sentAt;
    return result as R;
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
   * Cleans the session up (the server's idle timeout, the claim and the owner row as they were) and
   * gives it back to the pool; destroys it instead if that fails. Every lock it took was released
   * by name; nothing here releases by wholesale (`RELEASE_ALL_LOCKS()`), since a connection a
   * proxy shares may carry other clients' locks. Only a connection proven the session's own goes
   * back.
   */
  async retire(): Promise<void> {
    if (this.#ended) return;
    try {
      if (this.resources.size > 0) throw new Error("a lock of this session is still held or tried");
      await this.ping();
      await this.query(`SET SESSION wait_timeout = @@GLOBAL.wait_timeout, ${CLAIM} = NULL`);
      if (this.ownerWritten) {
        await this.query(`DELETE FROM ${this.#ownerTable} WHERE connection_id = ?`, [this.id]).catch(ignore);
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
export function checkOut(pool: MySqlPool, timeout: number, resource: string): Promise<MySqlPoolConnection> {
  return checkOutFor("MySQL", pool.getConnection(), timeout, resource);
}

/** A statement on `resource` failed: a StoreUnavailableError with the error as its cause (a refusal as it is). */
export function unavailable(resource: string, error: unknown): StoreUnavailableError | UnsupportedError {
  return error instanceof UnsupportedError ? error : statementFailed("MySQL", resource, error);
}

function ignore(): void {}
