import { checkOutWithin } from "../internal/pool-checkout.js";
import type { MySqlPool, MySqlPoolConnection } from "../mysql/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, within } from "./finding.js";

/** Runs one read-only statement on `connection` and returns its first row. */
async function row<R>(connection: MySqlPoolConnection, sql: string): Promise<R | undefined> {
  const [rows] = await connection.query(sql);
  return (rows as R[])[0];
}

/**
 * The findings of a MySqlLocker's pool: a proxy that shares server connections (two connections
 * of the pool answering one `CONNECTION_ID()`), and a read-only server (a replica: its user-level
 * locks are its own, and the fencing table cannot be written).
 */
export async function checkMySql(pool: MySqlPool): Promise<Finding[]> {
  const connections: MySqlPoolConnection[] = [];
  try {
    return await within(CHECK_TIMEOUT_MS, "MySQL", async () => {
      connections.push(await checkOutWithin(pool.getConnection(), CHECK_TIMEOUT_MS, "MySQL"));
      const first = connections[0] as MySqlPoolConnection;
      const state = await row<{ id: number; readOnly: number }>(
        first,
        "SELECT CONNECTION_ID() AS id, @@global.read_only AS readOnly",
      );
      const found: Finding[] = [];
      if (Number(state?.readOnly) === 1) {
        found.push(
          finding(
            "error",
            "mysql-read-only",
            "The server is read-only (read_only = ON, as a replica is): its GET_LOCK locks are its own, not the primary's, and fenced locks cannot bump their counter",
            "Point the locker's pool at the primary",
          ),
        );
      }
      connections.push(await checkOutWithin(pool.getConnection(), CHECK_TIMEOUT_MS, "MySQL"));
      const second = await row<{ id: number }>(connections[1] as MySqlPoolConnection, "SELECT CONNECTION_ID() AS id");
      if (state !== undefined && Number(second?.id) === Number(state.id)) {
        found.push(
          finding(
            "error",
            "mysql-multiplexing-proxy",
            "Two connections of the pool were handed one server connection: a multiplexing proxy is in between. MySqlLocker refuses to lock there, since two clients could hold one GET_LOCK lock",
            "Connect the locker's pool to MySQL directly, or keep a server connection per client for it",
          ),
        );
      }
      return found;
    });
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return [finding("error", "mysql-unreachable", `MySQL could not be checked: ${detail}`)];
  } finally {
    for (const connection of connections) connection.release();
  }
}
