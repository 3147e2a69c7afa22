/**
 * A table locker in a child process, for test/table's fault tests (bundled from the sources by
 * test/helpers/table-processes.ts, since the table lockers are not exported by the built package
 * yet). Its first argument is JSON: { target, options } (see TableTarget in table-harness.ts).
 *
 * Parent → child: { op: "loop", key, rounds, log, counter } — `rounds` times: take the key with a
 *   fencing token, append the token to the file `log`, add one to the number in the file `counter`
 *   (read, a pause, write: two holders at once would lose an update), release; then reply.
 * { op: "hold", key, options } — take the key and keep it (extended) until killed; reply with its
 *   fencing token.
 * Child → parent: { ok: true, fencingToken? } or { ok: false, error }.
 */
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import mysql from "mysql2/promise";
import pg from "pg";
import { MySqlTableLocker } from "../../src/table/mysql-table-locker.js";
import { PostgresTableLocker } from "../../src/table/postgres-table-locker.js";
import { SqliteLocker } from "../../src/table/sqlite-locker.js";

const { target, options } = JSON.parse(process.argv[2] ?? "{}");
const pool =
  target.dialect === "postgres"
    ? new pg.Pool({ ...target.connection, max: 2 })
    : target.dialect === "mysql"
      ? mysql.createPool({ ...target.connection, connectionLimit: 2 })
      : undefined;
pool?.on("error", () => undefined);
const locker =
  target.dialect === "postgres"
    ? new PostgresTableLocker(pool, options)
    : target.dialect === "mysql"
      ? new MySqlTableLocker(pool, options)
      : new SqliteLocker(target.path, options);

const reply = (message) => process.send?.(message);
const pause = () => new Promise((resolve) => setTimeout(resolve, 2));

process.on("disconnect", () => process.exit(0));
process.on("message", async (message) => {
  try {
    if (message.op === "loop") {
      for (let round = 0; round < message.rounds; round++) {
        const lease = await locker.acquire(AbortSignal.timeout(20_000), message.key, { fencing: true });
        appendFileSync(message.log, `${lease.fencingToken}\n`);
        const count = Number(readFileSync(message.counter, "utf8"));
        await pause();
        writeFileSync(message.counter, String(count + 1));
        await lease.release();
      }
      reply({ ok: true });
    } else if (message.op === "hold") {
      const lease = await locker.acquire(AbortSignal.timeout(20_000), message.key, {
        ...message.options,
        fencing: true,
      });
      reply({ ok: true, fencingToken: String(lease.fencingToken) });
    }
  } catch (error) {
    reply({ ok: false, error: String(error?.stack ?? error) });
  }
});
reply({ ready: true });
