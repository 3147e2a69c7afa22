import { checkOutWithin } from "../internal/pool-checkout.js";
import type { PostgresPool, PostgresPoolClient } from "../postgres/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, within } from "./finding.js";

/** Runs one read-only statement on `client` and returns its first row. */
async function row<R>(client: PostgresPoolClient, text: string): Promise<R | undefined> {
  return (await client.query({ text })).rows[0] as R | undefined;
}

/**
 * The findings of a PostgreSQL locker's pool: a pooler that shares sessions (two connections of
 * the pool handed one server session: `pg_backend_pid()` answers the same on both), and a server
 * that cannot take the locks (a standby in recovery, or read-only transactions by default).
 */
export async function checkPostgres(pool: PostgresPool): Promise<Finding[]> {
  const clients: PostgresPoolClient[] = [];
  try {
    return await within(CHECK_TIMEOUT_MS, "PostgreSQL", async () => {
      clients.push(await checkOutWithin(pool.connect(), CHECK_TIMEOUT_MS, "PostgreSQL"));
      const first = clients[0] as PostgresPoolClient;
      const state = await row<{ pid: number; recovery: boolean; readOnly: string }>(
        first,
        "SELECT pg_backend_pid() AS pid, pg_is_in_recovery() AS recovery, current_setting('default_transaction_read_only') AS \"readOnly\"",
      );
      const found: Finding[] = [];
      if (state?.recovery === true) {
        found.push(
          finding(
            "error",
            "postgres-read-only",
            "The pool connects to a standby in recovery: its advisory locks are its own, not the primary's, so lockers on the primary and on standbys never see each other's locks",
            "Point the locker's pool at the primary",
          ),
        );
      } else if (state?.readOnly === "on") {
        found.push(
          finding(
            "warning",
            "postgres-read-only",
            "Transactions are read-only by default on this connection (default_transaction_read_only = on): fenced locks cannot draw their tokens from the sequence",
            "Connect the locker to a read-write primary, or set default_transaction_read_only = off for its user",
          ),
        );
      }
      // A second connection while the first is idle: a transaction pooler hands it the server
      // session the first just used (PgBouncer reuses the latest first).
      clients.push(await checkOutWithin(pool.connect(), CHECK_TIMEOUT_MS, "PostgreSQL"));
      const second = await row<{ pid: number }>(clients[1] as PostgresPoolClient, "SELECT pg_backend_pid() AS pid");
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
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return [finding("error", "postgres-unreachable", `PostgreSQL could not be checked: ${detail}`)];
  } finally {
    for (const client of clients) client.release();
  }
}
