import { checkOutWithin } from "../internal/pool-checkout.js";
import type { PostgresPool, PostgresPoolClient } from "../postgres/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, PRIMARY_FIX, within } from "./finding.js";

/** Runs one read-only statement on `client` and returns its first row. */
async function row<R>(client: PostgresPoolClient, text: string): Promise<R | undefined> {
  return (await client.query({ text })).rows[0] as R | undefined;
}

/** What a PostgreSQL session says of its server: whether it may write. */
export interface PostgresServerState {
  /** The session's backend process id. */
  readonly pid: number;
  /** True on a standby in recovery. */
  readonly recovery: boolean;
  /** `default_transaction_read_only` (`"on"`, `"off"`). */
  readonly readOnly: string;
}

/** Reads `client`'s server state (one statement). */
export function serverState(client: PostgresPoolClient): Promise<PostgresServerState | undefined> {
  return row<PostgresServerState>(
    client,
    "SELECT pg_backend_pid() AS pid, pg_is_in_recovery() AS recovery, current_setting('default_transaction_read_only') AS \"readOnly\"",
  );
}

/** What a server a locker cannot write on costs it, in its findings' words (see {@link readOnlyFindings}). */
export interface ReadOnlyCost {
  /** What a standby in recovery costs (an error). */
  readonly standby: string;
  /** How bad transactions read-only by default are. */
  readonly readOnlyLevel: Finding["level"];
  /** What they cost. */
  readonly readOnly: string;
}

/**
 * The `postgres-read-only` finding of a server in `state` (a standby in recovery, or transactions
 * read-only by default), with what that costs the locker; none for a writable primary.
 */
export function readOnlyFindings(state: PostgresServerState | undefined, cost: ReadOnlyCost): Finding[] {
  if (state?.recovery === true) {
    return [
      finding(
        "error",
        "postgres-read-only",
        `The pool connects to a standby in recovery: ${cost.standby}`,
        PRIMARY_FIX,
      ),
    ];
  }
  if (state?.readOnly === "on") {
    return [
      finding(
        cost.readOnlyLevel,
        "postgres-read-only",
        `Transactions are read-only by default on this connection (default_transaction_read_only = on): ${cost.readOnly}`,
        "Connect the locker to a read-write primary, or set default_transaction_read_only = off for its user",
      ),
    ];
  }
  return [];
}

/** How a check uses a pool's connections (see {@link inspectPostgres}). */
export interface PostgresCheckout {
  /** Checks a connection out (given back when the check ends). */
  checkOut(): Promise<PostgresPoolClient>;
  /** Says that `client` failed with `error`: it is destroyed, not given back for reuse. */
  failed(client: PostgresPoolClient, error: Error): void;
}

/**
 * Runs `inspect` with connections of `pool`, everything within {@link CHECK_TIMEOUT_MS}: a pool
 * that gives no connection, or a server that does not answer, is the `postgres-unreachable`
 * finding. Each connection goes back to the pool after, or is destroyed when it failed.
 */
export async function inspectPostgres(
  pool: PostgresPool,
  inspect: (connections: PostgresCheckout) => Promise<Finding[]>,
): Promise<Finding[]> {
  const clients = new Map<PostgresPoolClient, { onError: (error: Error) => void; failure?: Error }>();
  let finished = false;
  const failed = (client: PostgresPoolClient, error: Error): void => {
    const entry = clients.get(client);
    if (entry !== undefined) entry.failure ??= error;
  };
  const checkOut = async (): Promise<PostgresPoolClient> => {
    const client = await checkOutWithin(pool.connect(), CHECK_TIMEOUT_MS, "PostgreSQL");
    if (finished) {
      // The check gave up meanwhile (its time ran out): nothing will use or give back this one.
      client.release();
      throw new Error("the check is over");
    }
    // A connection the server or a pooler ends while checked out reports it here, not unhandled.
    clients.set(client, { onError: (error) => failed(client, error) });
    client.on("error", (clients.get(client) as { onError: (error: Error) => void }).onError);
    return client;
  };
  try {
    return await within(CHECK_TIMEOUT_MS, "PostgreSQL", () => inspect({ checkOut, failed }));
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return [finding("error", "postgres-unreachable", `PostgreSQL could not be checked: ${detail}`)];
  } finally {
    finished = true;
    for (const [client, { onError, failure }] of clients) {
      // A failed connection keeps its listener: its end may still be reported after this.
      if (failure === undefined) client.removeListener("error", onError);
      client.release(failure);
    }
  }
}

/**
 * The findings of a PostgreSQL locker's pool: a pooler that shares sessions (two connections of
 * the pool handed one server session: `pg_backend_pid()` answers the same on both), and a server
 * that cannot take the locks (a standby in recovery, or read-only transactions by default).
 */
export function checkPostgres(pool: PostgresPool): Promise<Finding[]> {
  return inspectPostgres(pool, async ({ checkOut }) => {
    const state = await serverState(await checkOut());
    const found = readOnlyFindings(state, {
      standby:
        "its advisory locks are its own, not the primary's, so lockers on the primary and on standbys never see each other's locks",
      readOnlyLevel: "warning",
      readOnly: "fenced locks cannot draw their tokens from the sequence",
    });
    // A second connection while the first is idle: a transaction pooler hands it the server
    // session the first just used (PgBouncer reuses the latest first).
    const second = await row<{ pid: number }>(await checkOut(), "SELECT pg_backend_pid() AS pid");
    if (state !== undefined && second?.pid === state.pid) {
      found.push(
        finding(
          "error",
          "postgres-transaction-pooler",
          "Two connections of the pool were handed one server session: a pooler in transaction or statement mode (PgBouncer, Supavisor, RDS Proxy multiplexing) is in between. PostgresLocker refuses to lock there, since two clients could hold one session lock",
          "Give the locker's pool a session-mode pooler entry (PgBouncer pool_mode = session) or a direct connection",
        ),
      );
    }
    return found;
  });
}
