/**
 * The parts of `pg` the PostgreSQL locker uses, written out structurally so that the package's
 * declarations import nothing from `pg` (a `pg.Pool` and its `PoolClient`s fit them).
 */

/** A notification received on a `LISTEN`ing connection (`pg`'s `Notification`). */
export interface PostgresNotification {
  /** The backend process id of the session that sent it. */
  processId: number;
  /** The channel it was sent on. */
  channel: string;
  /** Its payload, if any. */
  payload?: string | undefined;
}

/** One connection checked out of a pool (`pg.PoolClient`). */
export interface PostgresPoolClient {
  /**
   * Runs one statement with its parameters (the locker bounds the wait for its answer itself);
   * with a `name`, as a prepared statement parsed once per connection. A prepared statement's
   * `name` and `text` are inherited from `config`'s prototype, as `pg` reads them: a client that
   * copies only a config's own properties loses them.
   */
  query(config: { name?: string; text: string; values?: unknown[] | undefined }): Promise<{
    /** The rows the statement returned. */
    rows: unknown[];
  }>;
  /** Gives the connection back to its pool; with an error (or `true`) the pool destroys it. */
  release(destroy?: boolean | Error): void;
  /** Listens for the connection's failure. */
  on(event: "error", listener: (error: Error) => void): unknown;
  /** Listens for the connection's end. */
  on(event: "end", listener: () => void): unknown;
  /** Listens for notifications (`LISTEN`/`NOTIFY`). */
  on(event: "notification", listener: (message: PostgresNotification) => void): unknown;
  /** Removes a listener added with `on`. */
  // biome-ignore lint/suspicious/noExplicitAny: EventEmitter's own listener type, so that a pg.PoolClient fits.
  removeListener(event: string, listener: (...args: any[]) => void): unknown;
}

/**
 * A pool of PostgreSQL connections: a `pg.Pool` that the caller creates, owns and ends. The
 * locker checks one connection out of it for as long as it needs one (see {@link PostgresLocker}).
 */
export interface PostgresPool {
  /** Checks a connection out of the pool (waiting while the pool is exhausted). */
  connect(): Promise<PostgresPoolClient>;
  /** Connections idle in the pool (`pg.Pool`'s; read to probe for a pooler without waiting). */
  readonly idleCount?: number;
  /** Connections the pool has open. */
  readonly totalCount?: number;
  /** The pool's settings (read: its size). */
  readonly options?: {
    /** The most connections the pool opens (pg's default 10). */
    readonly max?: number;
  };
}
