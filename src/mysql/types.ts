/**
 * The parts of `mysql2/promise` the MySQL locker uses, written out structurally so that the
 * package's declarations import nothing from `mysql2` (a `mysql2/promise` `Pool` and its
 * `PoolConnection`s fit them).
 */

/** The callback-style connection under a promise connection (`mysql2`'s `Connection`). */
export interface MySqlCoreConnection {
  /** The server's id of this connection (`CONNECTION_ID()`), from the handshake. */
  readonly threadId: number | null;
  /** Listens for the connection's failure. */
  on(event: "error", listener: (error: Error) => void): unknown;
  /** Listens for the connection's end. */
  on(event: "end", listener: () => void): unknown;
  /** Removes a listener added with `on`. */
  // biome-ignore lint/suspicious/noExplicitAny: EventEmitter's own listener type, so that a mysql2 Connection fits.
  removeListener(event: string, listener: (...args: any[]) => void): unknown;
}

/** One connection checked out of a pool (`mysql2/promise`'s `PoolConnection`). */
export interface MySqlPoolConnection {
  /** Runs one statement, its `?` placeholders filled in from `values`. */
  // biome-ignore lint/suspicious/noExplicitAny: mysql2's own parameter type, so that a PoolConnection fits.
  query(sql: string, values?: any): Promise<[unknown, unknown]>;
  /** Gives the connection back to its pool. */
  release(): void;
  /** Closes the connection at once; the pool forgets it. */
  destroy(): void;
  /** The underlying connection (events, thread id). */
  readonly connection: MySqlCoreConnection;
}

/**
 * A pool of MySQL or MariaDB connections: a `mysql2/promise` `Pool` that the caller creates, owns
 * and ends. The locker checks one connection out of it for as long as it needs one, and one more
 * per key it waits for (see {@link MySqlLocker}).
 */
export interface MySqlPool {
  /** Checks a connection out of the pool (waiting while the pool is exhausted). */
  getConnection(): Promise<MySqlPoolConnection>;
}
