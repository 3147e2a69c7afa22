import { performance } from "node:perf_hooks";
import { StoreUnavailableError } from "../errors.js";
import { CreateOnce } from "../internal/create-once.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { checkOutWithin } from "../internal/pool-checkout.js";
import type { Statement } from "./statements.js";
import type { PostgresNotification, PostgresPool, PostgresPoolClient } from "./types.js";

/** Why a session ended: its connection failed or ended, or it could not be confirmed in time. */
export type SessionEnd = "dropped" | "unconfirmed" | "retired";

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
   * `LISTEN`s on the channel, asks the server to end the session after `idleMs` idle (where
   * supported), reads the backend pid and sets `application_name` to the locker's `owner` (in the
   * same statement: no round trip of its own), so that every session can read who holds a lock
   * from `pg_stat_activity` (see `inspect.ts`). PostgreSQL shows at most its first 63 bytes, and
   * characters outside printable ASCII escaped. Throws (and ends the session) when the connection
   * fails.
   */
  async setUp(idleMs: number, owner: string): Promise<void> {
    const [row] = await this.query<{ pid: number }>(`LISTEN "${this.#channel}"`, undefined).then(() =>
      this.query<{ pid: number }>(
        "SELECT pg_backend_pid() AS pid, set_config('application_name', $1, false) IS NULL AS unset",
        [owner],
      ),
    );
    this.pid = row?.pid ?? 0;
    try {
      await this.query("SELECT set_config('idle_session_timeout', $1, false)", [`${idleMs}ms`]);
      this.idleTimeoutSet = true;
    } catch (error) {
      // Before PostgreSQL 14 there is no idle_session_timeout: the extensions alone keep watch.
      if (this.#ended) throw error;
    }
  }

  /**
   * Runs one statement (a {@link Statement} is sent as a named prepared statement) with the
   * session's timeout (counted from when it is sent). An ordinary SQL error is thrown as is; any
   * other failure ends the session first.
   */
  query<R>(statement: string | Statement, values: unknown[] | undefined): Promise<R[]> {
    // One statement on the wire at a time, in call order (pg 9 drops its own queue of concurrent
    // calls): a local waiter's attempt sent after a release still sees the key free. With nothing
    // queued, it is sent now (no hop through the queue's tail).
    let run: Promise<R[]>;
    if (this.#pending++ === 0) run = this.#send<R>(statement, values);
    else {
      const send = (): Promise<R[]> => this.#send<R>(statement, values);
      run = this.#tail.then(send, send);
    }
    this.#tail = run;
    return run;
  }

  /** Sends one statement of the queue (every one queued is sent, in turn, whatever came before). */
  async #send<R>(statement: string | Statement, values: unknown[] | undefined): Promise<R[]> {
    const sentAt = performance.now();
    try {
      if (this.#ended) throw new Error("the locker's PostgreSQL connection has ended");
      let result: { rows: unknown[] };
      try {
        result = await this.#ask(statement, values, this.#prepare);
      } catch (error) {
        // 26000: the prepared statement is gone from the server; unnamed, it needs none.
        if (typeof statement === "string" || (error as { code?: unknown }).code !== "26000") throw error;
        this.#prepare = false;
        result = await this.#ask(statement, values, false);
      }
      if (sentAt > this.confirmedAt) this.confirmedAt = sentAt;
      return result.rows as R[];
    } catch (error) {
      if (!isStatementError(error)) this.end("dropped", error);
      throw error;
    } finally {
      this.#pending--;
    }
  }

  /** Sends one statement (named when `prepare`) and bounds the wait for its answer. */
  #ask(statement: string | Statement, values: unknown[] | undefined, prepare: boolean): Promise<{ rows: unknown[] }> {
    const config =
      typeof statement === "string"
        ? values === undefined
          ? { text: statement }
          : { text: statement, values }
        : prepare
          ? { name: statement.name, text: statement.text, values }
          : { text: statement.text, values };
    // Our own timeout, not pg's `query_timeout`: pg's timer can fire while the answer already
    // waits in the socket (a burst of calls stalled the event loop), and ends a healthy session.
    return this.#deadlines.run(this.client.query(config), this.#timeoutError);
  }

  /**
   * Ends the session once: detaches from the client and hands it back to the pool — destroyed,
   * unless `how` is `"retired"` (the caller cleaned it up first).
   */
  end(how: SessionEnd, cause: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.client.removeListener("notification", this.#onNotification);
    this.client.removeListener("end", this.#onEnd);
    // Errors after the end (a late socket error) must not crash the process.
    this.client.removeListener("error", this.#onError);
    this.client.on("error", ignore);
    try {
      this.client.release(how === "retired" ? undefined : cause instanceof Error ? cause : true);
    } catch {
      // released already (the pool saw the error first)
    }
    this.#events.ended(this, how, cause);
  }

  /**
   * Cleans the session up (no listening, no idle timeout, no session lock left) and gives it back
   * to the pool; destroys it instead if that fails.
   */
  async retire(): Promise<void> {
    if (this.#ended) return;
    try {
      await this.query("UNLISTEN *", undefined);
      await this.query("RESET application_name", undefined);
      if (this.idleTimeoutSet) await this.query("RESET idle_session_timeout", undefined);
      await this.query("SELECT pg_advisory_unlock_all()", undefined);
      this.end("retired", undefined);
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
  let client: PostgresPoolClient;
  try {
    client = await checkOutWithin(pool.connect(), connectTimeout, "PostgreSQL");
  } catch (error) {
    throw unavailableServer(resource, error);
  }
  const session = new Session(client, operationTimeout, channel, events);
  try {
    await session.setUp(expiry, owner);
  } catch (error) {
    session.end("dropped", error);
    throw unavailableServer(resource, error);
  }
  return session;
}

function unavailableServer(resource: string, error: unknown): StoreUnavailableError {
  return new StoreUnavailableError(resource, `PostgreSQL is unavailable: ${messageOf(error)}`, { cause: error });
}

/** A statement on `resource` failed: a StoreUnavailableError with the error as its cause. */
export function unavailable(resource: string, error: unknown): StoreUnavailableError {
  return new StoreUnavailableError(resource, `PostgreSQL failed on "${resource}": ${messageOf(error)}`, {
    cause: error,
  });
}

/**
 * A locker's fencing sequence: created once per locker with `CREATE SEQUENCE IF NOT EXISTS`
 * (concurrent creators are harmless), and again after a statement found it missing.
 */
export class FencingSequence {
  readonly #name: string;
  readonly #created = new CreateOnce();

  constructor(name: string) {
    this.#name = name;
  }

  /** Makes sure the sequence exists; a failure is a StoreUnavailableError. */
  async ensure(session: Session, resource: string): Promise<void> {
    try {
      await this.#created.ensure(() =>
        session.query(`CREATE SEQUENCE IF NOT EXISTS ${this.#name}`, undefined).catch((error: unknown) => {
          const code = (error as { code?: unknown }).code;
          // Two sessions creating it at once: one wins, the other sees a duplicate.
          if (code !== "23505" && code !== "42P07") throw error;
        }),
      );
    } catch (error) {
      throw new StoreUnavailableError(
        resource,
        `PostgreSQL could not create the fencing sequence ${this.#name}: ${messageOf(error)}`,
        { cause: error },
      );
    }
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
  failed(resource: string, error: unknown): StoreUnavailableError {
    // The sequence was dropped (or never made it to disk): create it again next time.
    if ((error as { code?: unknown }).code === "42P01") this.#created.forget();
    return unavailable(resource, error);
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function ignore(): void {}
