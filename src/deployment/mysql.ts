import { checkOutWithin } from "../internal/pool-checkout.js";
import type { MySqlPool, MySqlPoolConnection } from "../mysql/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, PRIMARY_FIX, within } from "./finding.js";

/** Runs one read-only statement on `connection` and returns its first row. */
async function row<R>(connection: MySqlPoolConnection, sql: string): Promise<R | undefined> {
  const [rows] = await connection.query(sql);
  return (rows as R[])[0];
}

/** What a MySQL connection says of its server. */
export interface MySqlServerState {
  /** The server's id of the connection (`CONNECTION_ID()`). */
  readonly id: number;
  /** `read_only` is on (as on a replica). */
  readonly readOnly: boolean;
}

/** Reads `connection`'s server state (one statement). */
export async function serverState(connection: MySqlPoolConnection): Promise<MySqlServerState | undefined> {
  const state = await row<{ id: unknown; readOnly: unknown }>(
    connection,
    "SELECT CONNECTION_ID() AS id, @@global.read_only AS readOnly",
  );
  return state === undefined ? undefined : { id: Number(state.id), readOnly: Number(state.readOnly) === 1 };
}

/**
 * The `mysql-read-only` finding of a server in `state` (`read_only` on, as on a replica), with
 * what that `costs` the locker; none for a writable primary.
 */
export function readOnlyFindings(state: MySqlServerState | undefined, costs: string): Finding[] {
  if (state?.readOnly !== true) return [];
  return [
    finding(
      "error",
      "mysql-read-only",
      `The server is read-only (read_only = ON, as a replica is): ${costs}`,
      PRIMARY_FIX,
    ),
  ];
}

/**
 * Runs `inspect` with connections of `pool` (checked out by its `checkOut`, each given back
 * after), everything within {@link CHECK_TIMEOUT_MS}: a pool that gives no connection, or a server
 * that does not answer, is the `mysql-unreachable` finding.
 */
export async function inspectMySql(
  pool: MySqlPool,
  inspect: (checkOut: () => Promise<MySqlPoolConnection>) => Promise<Finding[]>,
): Promise<Finding[]> {
  const connections: MySqlPoolConnection[] = [];
  let finished = false;
  const checkOut = async (): Promise<MySqlPoolConnection> => {
    const connection = await checkOutWithin(pool.getConnection(), CHECK_TIMEOUT_MS, "MySQL");
    if (finished) {
      // The check gave up meanwhile (its time ran out): nothing will use or give back this one.
      connection.release();
      throw new Error("the check is over");
    }
    connections.push(connection);
    return connection;
  };
  try {
    return await within(CHECK_TIMEOUT_MS, "MySQL", () => inspect(checkOut));
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return [finding("error", "mysql-unreachable", `MySQL could not be checked: ${detail}`)];
  } finally {
    finished = true;
    for (const connection of connections) connection.release();
  }
}

/**
 * The findings of a MySqlLocker's pool: a proxy that shares server connections (two connections
 * of the pool answering one `CONNECTION_ID()`), and a read-only server (a replica: its user-level
 * locks are its own, and the fencing table cannot be written).
 */
export function checkMySql(pool: MySqlPool): Promise<Finding[]> {
  return inspectMySql(pool, async (checkOut) => {
    const state = await serverState(await checkOut());
    const found = readOnlyFindings(
      state,
      "its GET_LOCK locks are its own, not the primary's, and fenced locks cannot bump their counter",
    );
    const second = await row<{ id: unknown }>(await checkOut(), "SELECT CONNECTION_ID() AS id");
    if (state !== undefined && Number(second?.id) === state.id) {
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
}
