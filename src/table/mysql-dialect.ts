import type { MySqlPool, MySqlPoolConnection } from "../mysql/types.js";
import type { TableDialect } from "./dialect.js";
import type { Answers, Step } from "./plans.js";
import { type PoolDriver, PooledDialect } from "./pooled-dialect.js";
import { escapeLike, keyRows } from "./postgres-dialect.js";

/**
 * The server's clock in ms, read once per statement (`UTC_TIMESTAMP` is when the statement began;
 * in UTC, so no time zone or daylight-saving change moves it).
 */
const NOW = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/** What `query` answers for a write. */
interface WriteResult {
  readonly affectedRows: number;
  readonly insertId: number | string | bigint;
}

/**
 * MySQL 8 or MariaDB 10.3+ through the caller's `mysql2/promise` pool (through ProxySQL too: no
 * session state, no `GET_LOCK`, client-side placeholders). Names are `VARBINARY(2048)`: compared
 * byte for byte, and short enough for InnoDB's index (the prefix is at most 1024 bytes, a key
 * 1024). Without RETURNING, a renewal reads back which rows it renewed, and a release deletes the
 * unexpired row first, then an expired one. The key's lock row in `<table>_keys` is locked by an
 * upsert and deleted after a release that left the key empty.
 */
export class MySqlDialect extends PooledDialect<MySqlPool, MySqlPoolConnection> implements TableDialect {
  readonly kind = "mysql";
  readonly #leases: string;
  readonly #keys: string;
  readonly #table: string;

  constructor(pool: MySqlPool, table: string) {
    super(pool, MYSQL_POOL);
    this.#table = table;
    this.#leases = `\`${table}\``;
    this.#keys = `\`${table}_keys\``;
  }

  protected async step(connection: MySqlPoolConnection, step: Step): Promise<Answers[Step["op"]]> {
    const leases = this.#leases;
    const read = async (sql: string, values: unknown[]): Promise<Array<Record<string, unknown>>> =>
      (await connection.query(sql, values))[0] as Array<Record<string, unknown>>;
    const write = async (sql: string, values: unknown[]): Promise<WriteResult> =>
      (await connection.query(sql, values))[0] as WriteResult;
    switch (step.op) {
      case "create":
        await connection.query(
          `CREATE TABLE IF NOT EXISTS ${leases} (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, ` +
            "name VARBINARY(2048) NOT NULL, token VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, " +
            "owner VARCHAR(256) CHARACTER SET utf8mb4 NOT NULL, weight BIGINT NOT NULL, expires_at BIGINT NOT NULL, " +
            `UNIQUE KEY \`${this.#table}_token\` (token), KEY \`${this.#table}_name\` (name, id)) ENGINE=InnoDB`,
        );
        await connection.query(
          `CREATE TABLE IF NOT EXISTS ${this.#keys} (name VARBINARY(2048) NOT NULL PRIMARY KEY) ENGINE=InnoDB`,
        );
        return undefined;
      case "lock":
        await write(`INSERT INTO ${this.#keys} (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name`, [step.name]);
        return undefined;
      case "rows":
        return keyRows(
          await read(
            `SELECT ${NOW} AS now, CAST(l.id AS CHAR) AS id, l.token, l.owner, l.weight, l.expires_at ` +
              `FROM (SELECT 1 AS one) n LEFT JOIN ${leases} l ON l.name = ? ORDER BY l.id`,
            [step.name],
          ),
        );
      case "insert": {
        const { insertId } = await write(
          `INSERT INTO ${leases} (name, token, owner, weight, expires_at) VALUES (?, ?, ?, ?, ${NOW} + ?)`,
          [step.name, step.token, step.owner, step.weight, step.ttl],
        );
        return BigInt(insertId);
      }
      case "renew": {
        // Read back after the update: a renewed row expires after the read's clock, a row too old
        // to renew expired before the update's (which is not later than the read's).
        const tokens = [step.tokens];
        await write(`UPDATE ${leases} SET expires_at = ${NOW} + ? WHERE token IN (?) AND expires_at > ${NOW}`, [
          step.ttl,
          ...tokens,
        ]);
        const rows = await read(`SELECT token FROM ${leases} WHERE token IN (?) AND expires_at > ${NOW}`, tokens);
        return new Set(rows.map((row) => String(row.token)));
      }
      case "purge":
        return (await write(`DELETE FROM ${leases} WHERE token IN (?) AND expires_at <= ${NOW}`, [step.tokens]))
          .affectedRows;
      case "remove": {
        let found: "live" | "expired" | "absent" = "live";
        if (
          (await write(`DELETE FROM ${leases} WHERE token = ? AND expires_at > ${NOW}`, [step.token])).affectedRows ===
          0
        ) {
          const { affectedRows } = await write(`DELETE FROM ${leases} WHERE token = ?`, [step.token]);
          found = affectedRows === 0 ? "absent" : "expired";
        }
        if (found !== "absent") {
          await write(
            `DELETE FROM ${this.#keys} WHERE name = ? AND NOT EXISTS (SELECT 1 FROM ${leases} WHERE name = ?)`,
            [step.name, step.name],
          );
        }
        return found;
      }
      case "held":
        return (
          (await read(`SELECT 1 FROM ${leases} WHERE name = ? AND expires_at > ${NOW} LIMIT 1`, [step.name])).length > 0
        );
      case "swap":
        return (
          (
            await write(
              `UPDATE ${leases} SET token = ?, owner = ?, expires_at = ${NOW} + ? WHERE token = ? AND expires_at > ${NOW}`,
              [step.fresh, step.owner, step.ttl, step.token],
            )
          ).affectedRows > 0
        );
      case "names": {
        const rows = await read(
          `SELECT DISTINCT name FROM ${leases} WHERE name LIKE ? ESCAPE '!' AND expires_at > ${NOW} ORDER BY name LIMIT ?`,
          [`${escapeLike(step.prefix)}%`, step.limit],
        );
        return rows.map((row) => (Buffer.isBuffer(row.name) ? row.name.toString("utf8") : String(row.name)));
      }
    }
  }
}

/** An error the server answered (it has an errno and a SQL state): the connection is fine. */
function isStatementError(error: unknown): boolean {
  const { errno, sqlState, fatal } = error as { errno?: unknown; sqlState?: unknown; fatal?: unknown };
  return typeof errno === "number" && typeof sqlState === "string" && fatal !== true;
}

/** A deadlock (1213) or a lock wait timeout (1205): the transaction may simply be run again. */
function isRetryable(error: unknown): boolean {
  const { errno } = error as { errno?: unknown };
  return errno === 1213 || errno === 1205;
}

/** How a plan runs on a `mysql2/promise` pool. */
const MYSQL_POOL: PoolDriver<MySqlPool, MySqlPoolConnection> = {
  begin: "START TRANSACTION",
  connect: (pool) => pool.getConnection(),
  events: (connection) => connection.connection,
  query: (connection, sql) => connection.query(sql),
  release: (connection) => connection.release(),
  destroy: (connection) => connection.destroy(),
  isStatementError,
  isRetryable,
};
