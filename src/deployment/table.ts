import type { MySqlPool } from "../mysql/types.js";
import type { PostgresPool } from "../postgres/types.js";
import { type Finding, finding } from "./finding.js";
import { inspectMySql, readOnlyFindings as mySqlReadOnly, serverState as mySqlState } from "./mysql.js";
import { inspectPostgres, readOnlyFindings as postgresReadOnly, serverState as postgresState } from "./postgres.js";

/**
 * The findings of a PostgreSQL table locker's pool: a server it cannot write its lease table on
 * (a standby in recovery, or transactions read-only by default: every attempt writes, so every
 * one fails), and a pooler in statement mode (it refuses the transaction an attempt is). A
 * transaction pooler is not a finding: nothing of a table locker outlives a transaction.
 */
export function checkPostgresTable(pool: PostgresPool): Promise<Finding[]> {
  return inspectPostgres(pool, async ({ checkOut, failed }) => {
    const client = await checkOut();
    const state = await postgresState(client);
    const found = postgresReadOnly(state, {
      standby:
        "the lease table cannot be written there, so every attempt fails (and the standby's rows are a copy of the primary's, behind it)",
      readOnlyLevel: "error",
      readOnly: "every attempt writes the lease table, so every one fails",
    });
    try {
      await client.query({ text: "BEGIN READ ONLY" });
      await client.query({ text: "ROLLBACK" });
    } catch (error) {
      // PgBouncer's statement mode ends the connection at a BEGIN ("transaction blocks not
      // allowed in statement pooling mode"); anything else is the server's, not the setup's.
      if (!/statement pooling/i.test(error instanceof Error ? error.message : "")) throw error;
      failed(client, error as Error);
      found.push(
        finding(
          "error",
          "postgres-statement-pooler",
          "A pooler in statement mode is in between: it refuses transactions, and every attempt of a table locker is one, so every one fails",
          "Give the locker's pool a transaction-mode (or session-mode) pooler entry, or a direct connection",
        ),
      );
    }
    return found;
  });
}

/**
 * The findings of a MySQL table locker's pool: a read-only server (a replica: users without
 * SUPER cannot write its lease table, and the rows it has are a copy that lockers on the primary
 * never see). A multiplexing proxy is not a finding: nothing of a table locker outlives a
 * transaction.
 */
export function checkMySqlTable(pool: MySqlPool): Promise<Finding[]> {
  return inspectMySql(pool, async (checkOut) => {
    const state = await mySqlState(await checkOut());
    return mySqlReadOnly(
      state,
      "users without SUPER cannot write the lease table, so their every attempt fails, and rows written there anyway are not the primary's: lockers on the primary never see them",
    );
  });
}
