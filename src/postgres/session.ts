import { performance } from "node:perf_hooks";
import { type StoreUnavailableError, UnsupportedError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { checkOutWithin } from "../internal/pool-checkout.js";
import { newToken } from "../internal/token.js";
import { FencingStore } from "../sql/fencing-store.js";
import type { SessionEnd } from "../sql/session-slot.js";
import { checkOutFor, serverUnavailable, statementFailed } from "../sql/sql-errors.js";
import { CLAIM_SETTING, poolerRefusal, sameSession } from "./pooler.js";
import { callOf, PING, ranElsewhere, type Statement } from "./statements.js";
import type { PostgresNotification, PostgresPool, PostgresPoolClient } from "./types.js";

/** What a session tells its locker. */
export interface SessionEvents {
  /** A notification from another session on the locker's channel. */
  notified(payload: string): void;
  /** The session ended (called once); its session locks are gone with it unless `retired`. */
  ended(session: Session, how: SessionEnd, cause: unknown): void;
}

/** SQLSTATE classes after which the connection is still usable (the statement failed, not the session). */
function isStatementError(error: unknown): boolean {
  const { severity, code } = error as { severity?: unknown; code?: unknown };
  return severity === "ERROR" && typeof code === "string" && !code.startsWith("08") && !code.startsWith("57");
}

/**
 * The locker's one connection, checked out of the caller's pool: it holds every session advisory
 * lock the locker takes, `LISTEN`s on the locker's channel, and answers the extensions' `SELECT 1`.
 * A statement that fails with anything but an ordinary SQL error (a dropped connection, a timeout,
 * a FATAL from `pg_terminate_backend` or a restart) ends the session: the connection is destroyed,
 * never given back to the pool with locks on it.
 */
export class Session {
  readonly client: PostgresPoolClient;
  /** The token this session claims its server connection with (see pooler.ts). */
  readonly token = newToken();
  /** The backend's process id (to ignore our own notifications). */
  pid = 0;
  /** `performance.now()` at which the latest statement that was answered had been sent. */
  confirmedAt = performance.now();
  /** Tokens of the leases held on this session, each with whether its lock is shared. */
  readonly holds = new Map<string, boolean>();
  /**
   * Resources held or being tried on this session: how many shared, or -1 for exclusive. Session
   * locks are re-entrant, so a second try here would succeed: the backend asks only when it may.
   */
  readonly resources = new Map<string, number>();
  /** Whether `idle_session_timeout` was set (PostgreSQL 14 and later), to reset it on retirement. */
  idleTimeoutSet = false;
  /** `application_name` and `idle_session_timeout` as they were before `setUp`, restored on retirement. */
  #before: { name: string; idle: string | null } = { name: "", idle: null };
  #ended = false;
  /** The latest statement queued (settled or not; its rejection is handled by its caller). */
  #tail: Promise<unknown> = Promise.resolve();
  /** Statements queued or on the wire: with none, the next one is sent at once. */
  #pending = 0;
  /**
   * False once the server lost a prepared statement that `pg` believes it has (a `DISCARD ALL` or
   * `DEALLOCATE` on this connection by someone else): from then on, statements go unnamed.
   */
  #prepare = true;
  readonly #timeout: number;
  /** Bounds each statement's wait for its answer (not pg's `query_timeout`: see {@link DeadlineGroup}). */
  readonly #deadlines: DeadlineGroup;
  readonly #timeoutError = (): Error => new Error(`PostgreSQL did not answer within ${this.#timeout} ms`);
  readonly #channel: string;
  readonly #events: SessionEvents;
  readonly #onError = (error: Error): void => this.end("dropped", error);
  readonly #onEnd = (): void => this.end("dropped", new Error("the connection to PostgreSQL ended"));
  readonly #onNotification = (message: PostgresNotification): void => {
    if (message.channel === this.#channel && message.processId !== this.pid && message.payload !== undefined) {
      this.#events.notified(message.payload);
    }
  };

  constructor(client: PostgresPoolClient, timeout: number, channel: string, events: SessionEvents) {
    this.client = client;
    this.#timeout = timeout;
    this.#deadlines = new DeadlineGroup(timeout, { inOrder: true });
    this.#channel = channel;
    this.#events = events;
    client.on("error", this.#onError);
    client.on("end", this.#onEnd);
    client.on("notification", this.#onNotification);
  }

  /** True once the session ended (dropped, unconfirmed or retired). */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Claims the server connection (see pooler.ts), reads the backend pid and sets `application_name`
   * to the locker's `owner` in one statement, so that every session can read who holds a lock from
   * `pg_stat_activity` (see `inspect.ts`; PostgreSQL shows at most its first 63 bytes, and
   * characters outside printable ASCII escaped); then `LISTEN`s on the channel and asks the server
   * to end the session after `idleMs` idle (where supported). Throws (and ends the session) when
   * the connection fails, or with the pooler refusal when the connection carries another session.
   */
  async setUp(idleMs: number, owner: string): Promise<void> {
    const [row] = await this.query<{ pid: number; name: string; idle: string | null }>(
      `WITH c AS MATERIALIZED (SELECT coalesce(current_setting('${CLAIM_SETTING}', true), '') = '' AS free,
        current_setting('application_name') AS name, current_setting('idle_session_timeout', true) AS idle)
      SELECT pg_backend_pid() AS pid, c.name, c.idle,
        CASE WHEN c.free THEN set_config('${CLAIM_SETTING}', $2, false) = $2 AND set_config('application_name', $1, false) IS NOT NULL
          ELSE false END AS same
      FROM c`,
      [owner, this.token],
      "claimed",
    );
    this.pid = row?.pid ?? 0;
    this.#before = { name: row?.name ?? "", idle: row?.idle ?? null };
    await this.query(`LISTEN "${this.#channel}"`, undefined);
    if (this.#before.idle === null) return; // before PostgreSQL 14: the extensions alone keep watch
    await this.query(
      `SELECT CASE WHEN ${sameSession(2)} THEN set_config('idle_session_timeout', $1, false) END AS idle, ${sameSession(2)} AS same`,
      [`${idleMs}ms`, this.token],
    );
    this.idleTimeoutSet = true;
  }

  /** Confirms the session: its connection answers, and is still the session's own. */
  ping(): Promise<unknown> {
    return this.query(PING, [this.token]);
  }

  /**
   * Runs one statement (a {@link Statement} is sent as a named prepared statement) with the
   * session's timeout (counted from when it is sent). An ordinary SQL error is thrown as is; any
   * other failure ends the session first. A statement whose first row answers that it ran on a
   * server connection that is not the session's (see {@link ranElsewhere}) ends the session as
   * moved, and the pooler refusal (named after `sign`) is thrown. `now`: `performance.now()` as the
   * caller read it just before the call (a clock read saved when the statement goes out at once).
   */
  query<R>(
    statement: string | Statement,
    values: unknown[] | undefined,
    sign: "claimed" | "moved" = "moved",
    now?: number,
  ): Promise<R[]> {
    // One statement on the wire at a time, in call order (pg 9 drops its own queue of concurrent
    // calls): a local waiter's attempt sent after a release still sees the key free. With nothing
    // queued, it is sent now (no hop through the queue's tail).
    let run: Promise<R[]>;
    if (this.#pending++ === 0) run = this.#send<R>(statement, values, sign, now ?? performance.now());
    else {
      const send = (): Promise<R[]> => this.#send<R>(statement, values, sign, performance.now());
      run = this.#tail.then(send, send);
    }
    this.#tail = run;
    return run;
  }

  /** Sends one statement of the queue (every one queued is sent, in turn, whatever came before). */
  async #send<R>(
    statement: string | Statement,
    values: unknown[] | undefined,
    sign: "claimed" | "moved",
    sentAt: number,
  ): Promise<R[]> {
    try {
      if (this.#ended) throw new Error("the locker's PostgreSQL connection has ended");
      let result: { rows: unknown[] };
      try {
        result = await this.#ask(statement, values, this.#prepare, sentAt);
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        // 42P05: another client prepared it on this server connection: a pooler shares it.
        if (code === "42P05") throw this.#moved(poolerRefusal("prepared", error));
        // 26000: the prepared statement is gone from the server (someone ran DEALLOCATE on this
        // connection); unnamed, it needs none. A statement that moved is caught by its claim check.
        if (typeof statement === "string" || code !== "26000") throw error;
        this.#prepare = false;
        result = await this.#ask(statement, values, false, performance.now());
      }
      const first = result.rows[0] as Record<string, unknown> | undefined;
      if (first !== undefined && ranElsewhere(statement, first)) throw this.#moved(poolerRefusal(sign));
      if (sentAt > this.confirmedAt) this.confirmedAt = sentAt;
      return result.rows as R[];
    } catch (error) {
      if (!this.#ended && !isStatementError(error)) this.end("dropped", error);
      throw error;
    } finally {
      this.#pending--;
    }
  }

  /** Sends one statement (named when `prepare`), sent at `now`, and bounds the wait for its answer. */
  #ask(
    statement: string | Statement,
    values: unknown[] | undefined,
    prepare: boolean,
    now: number,
  ): Promise<{ rows: unknown[] }> {
    const config =
      typeof statement === "string"
        ? values === undefined
          ? { text: statement }
          : { text: statement, values }
        : prepare
          ? callOf(statement, values)
          : { text: statement.text, values };
    // Our own timeout, not pg's `query_timeout`: pg's timer can fire while the answer already
    // waits in the socket (a burst of calls stalled the event loop), and ends a healthy session.
    return this.#deadlines.run(this.client.query(config), this.#timeoutError, now);
  }

  /** Ends the session as moved (shared by a pooler) and returns the refusal to throw. */
  #moved(refusal: Error): Error {
    this.end("moved", refusal);
    return refusal;
  }

  /**
   * Ends the session once: detaches from the client and hands it back to the pool — destroyed,
   * unless it was `"retired"` clean (the caller cleaned it up first and `destroy` is false).
   */
  end(how: SessionEnd, cause: unknown, destroy = how !== "retired"): void {
    if (this.#ended) return;
    this.#ended = true;
    this.client.removeListener("notification", this.#onNotification);
    this.client.removeListener("end", this.#onEnd);
    // Errors after the end (a late socket error) must not crash the process.
    this.client.removeListener("error", this.#onError);
    this.client.on("error", ignore);
    try {
      this.client.release(!destroy ? undefined : cause instanceof Error ? cause : true);
    } catch {
      // released already (the pool saw the error first)
    }
    this.#events.ended(this, how, cause);
  }

  /**
   * Cleans the session up and gives it back to the pool: no listening, `application_name` and the
   * idle timeout as they were, the claim cleared. Only a session proven its own and holding no
   * advisory lock goes back; any other is destroyed, which frees its locks with it on a direct
   * connection or behind a session pooler. Nothing here unlocks by wholesale: a server connection
   * a pooler shares may carry other clients' locks.
   */
  async retire(): Promise<void> {
    if (this.#ended) return;
    const idle = this.idleTimeoutSet ? `AND set_config('idle_session_timeout', $3, false) IS NOT NULL` : "";
    try {
      await this.query("UNLISTEN *", undefined);
      const [row] = await this.query<{ clean: boolean }>(
        `WITH s AS MATERIALIZED (SELECT ${sameSession(1)} AS same,
          NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS clean)
        SELECT s.same, s.clean AND set_config('application_name', $2, false) IS NOT NULL ${idle}
          AND set_config('${CLAIM_SETTING}', '', false) = '' AS clean
        FROM s`,
        this.idleTimeoutSet ? [this.token, this.#before.name, this.#before.idle] : [this.token, this.#before.name],
      );
      this.end("retired", undefined, row?.clean !== true);
    } catch (error) {
      this.end("dropped", error);
    }
  }
}

/** What {@link openSession} needs. */
export interface SessionSettings {
  readonly connectTimeout: number;
  readonly operationTimeout: number;
  /** `idle_session_timeout`, in ms. */
  readonly expiry: number;
  readonly channel: string;
  /** The locker's owner, set as the session's `application_name`. */
  readonly owner: string;
}

/**
 * Checks a connection out of `pool` (within `connectTimeout`) and sets it up as a {@link Session};
 * failures are a StoreUnavailableError naming `resource`.
 */
export async function openSession(
  pool: PostgresPool,
  settings: SessionSettings,
  events: SessionEvents,
  resource: string,
): Promise<Session> {
  const { connectTimeout, operationTimeout, expiry, channel, owner } = settings;
  const client = await checkOutFor("PostgreSQL", pool.connect(), connectTimeout, resource);
  const session = new Session(client, operationTimeout, channel, events);
  try {
    await session.setUp(expiry, owner);
    await probeSharing(pool, session, connectTimeout);
  } catch (error) {
    if (error instanceof UnsupportedError) throw error;
    session.end("dropped", error);
    throw serverUnavailable("PostgreSQL", resource, error);
  }
  return session;
}

/**
 * Asks a second connection of the pool whose session it was handed: on a direct connection or
 * behind a session pooler it is never `session`'s; a transaction pooler hands it the server
 * connection `session` just used (PgBouncer reuses the latest first). Only while the pool has a
 * connection to spare: a locker never waits for its own probe. A connection opened for the probe
 * is closed after it, so the pool keeps the size it had. Throws the pooler refusal (and ends
 * `session`) when the probe found the session's claim.
 */
async function probeSharing(pool: PostgresPool, session: Session, timeout: number): Promise<void> {
  const { idleCount, totalCount, options } = pool;
  if (idleCount === undefined || totalCount === undefined) return;
  const opened = idleCount === 0;
  if (opened && totalCount >= (options?.max ?? 10)) return;
  let probe: PostgresPoolClient;
  try {
    probe = await checkOutWithin(pool.connect(), timeout, "PostgreSQL");
  } catch {
    return; // no probe: the claim checks of every statement still hold
  }
  let seen: unknown;
  // A destroyed probe keeps this listener: a late socket error must not crash the process.
  probe.on("error", ignore);
  try {
    const asking = probe.query({ text: `SELECT current_setting('${CLAIM_SETTING}', true) AS seen` });
    const { rows } = await new DeadlineGroup(timeout, { inOrder: true }).run(
      asking,
      () => new Error(`PostgreSQL did not answer within ${timeout} ms`),
    );
    seen = (rows[0] as { seen?: unknown } | undefined)?.seen;
    if (!opened) probe.removeListener("error", ignore);
    probe.release(opened);
  } catch (error) {
    probe.release(error instanceof Error ? error : true);
  }
  if (seen === session.token) {
    const refusal = poolerRefusal("shared");
    session.end("moved", refusal);
    throw refusal;
  }
}

/** A statement on `resource` failed: a StoreUnavailableError with the error as its cause. */
export function unavailable(resource: string, error: unknown): StoreUnavailableError {
  return statementFailed("PostgreSQL", resource, error);
}

/**
 * A locker's fencing sequence: created once per locker with `CREATE SEQUENCE IF NOT EXISTS`
 * (concurrent creators are harmless), and again after a statement found it missing.
 */
export class FencingSequence extends FencingStore<Session> {
  constructor(name: string) {
    super("PostgreSQL", "sequence", name);
  }

  protected create(session: Session): Promise<unknown> {
    return session.query(`CREATE SEQUENCE IF NOT EXISTS ${this.name}`, undefined).catch((error: unknown) => {
      const code = (error as { code?: unknown }).code;
      // Two sessions creating it at once: one wins, the other sees a duplicate.
      if (code !== "23505" && code !== "42P07") throw error;
    });
  }

  /** Runs a statement of an acquisition; a failure is a StoreUnavailableError with its cause. */
  async run<R>(session: Session, resource: string, statement: string | Statement, values: unknown[]): Promise<R[]> {
    try {
      return await session.query<R>(statement, values);
    } catch (error) {
      throw this.failed(resource, error);
    }
  }

  /** What a failed statement of an acquisition on `resource` throws: a StoreUnavailableError with its cause. */
  failed(resource: string, error: unknown): StoreUnavailableError | UnsupportedError {
    if (error instanceof UnsupportedError) return error;
    // The sequence was dropped (or never made it to disk): create it again next time.
    if ((error as { code?: unknown }).code === "42P01") this.forget();
    return unavailable(resource, error);
  }
}

function ignore(): void {}
