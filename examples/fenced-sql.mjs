// Fencing on the resource side, in SQL: a write carries the lease's fencing token, and the table
// refuses a token older than the last one it accepted. A holder that paused past its lease (a GC
// pause, a frozen VM) and wakes up after another holder wrote cannot overwrite that write.
//
//   DATABASE_URL=postgres://user:password@127.0.0.1:5432/db node examples/fenced-sql.mjs
//
// It creates a table fenced_orders_example, plays two holders of one lock against it, prints what
// each write did, and drops the table. (MySQL: see docs/fencing.md for the same statements.)

import { PostgresLocker } from "globallock";
import pg from "pg";

/** The conditional write: only a token at least as new as the row's last one updates it. */
const FENCED_UPDATE = `UPDATE fenced_orders_example SET status = $2, fence = $3
  WHERE id = $1 AND fence <= $3`;

/** The insert-or-update form: a new row, or an update that a newer token already made is not undone. */
const FENCED_UPSERT = `INSERT INTO fenced_orders_example AS t (id, status, fence) VALUES ($1, $2, $3)
  ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, fence = EXCLUDED.fence
  WHERE t.fence <= EXCLUDED.fence`;

const url = process.env.DATABASE_URL;
if (!url) {
  console.error("Set DATABASE_URL to a PostgreSQL database this example may create a table in.");
  process.exit(2);
}
const pool = new pg.Pool({ connectionString: url, max: 4 });
const a = new PostgresLocker(pool, { owner: "holder A" });
const b = new PostgresLocker(pool, { owner: "holder B" });

/** Runs a fenced statement; tells whether the row took it. */
async function write(statement, id, status, token) {
  const { rowCount } = await pool.query(statement, [id, status, token.toString()]);
  return rowCount === 1 ? "accepted" : "rejected";
}

try {
  await pool.query(`CREATE TABLE IF NOT EXISTS fenced_orders_example (
    id integer PRIMARY KEY, status text NOT NULL, fence bigint NOT NULL DEFAULT 0)`);
  await pool.query("INSERT INTO fenced_orders_example (id, status) VALUES (42, 'paid') ON CONFLICT (id) DO NOTHING");

  // A takes the lock with a short lease it does not extend, then "pauses" past it.
  const leaseA = await a.acquire(AbortSignal.timeout(10_000), "order:42", {
    fencing: true,
    autoExtend: false,
    expiry: 300,
  });
  console.log(`A holds the lock with fencing token ${leaseA.fencingToken}, then pauses past its lease`);

  // Meanwhile A's lease ran out: B gets the lock, with a newer token, and writes.
  const leaseB = await b.acquire(AbortSignal.timeout(10_000), "order:42", { fencing: true });
  console.log(
    `B holds the lock with fencing token ${leaseB.fencingToken}: UPDATE ${await write(FENCED_UPDATE, 42, "shipped by B", leaseB.fencingToken)}`,
  );

  // A wakes up, still believing it holds the lock, and writes with its old token: refused.
  console.log(
    `A wakes up with token ${leaseA.fencingToken}: UPDATE ${await write(FENCED_UPDATE, 42, "cancelled by A", leaseA.fencingToken)}`,
  );
  console.log(
    `upsert with token ${leaseB.fencingToken}: ${await write(FENCED_UPSERT, 42, "delivered by B", leaseB.fencingToken)}; ` +
      `with token ${leaseA.fencingToken}: ${await write(FENCED_UPSERT, 42, "cancelled by A", leaseA.fencingToken)}`,
  );
  await leaseB.release();
  await leaseA.release();

  const { rows } = await pool.query("SELECT status, fence FROM fenced_orders_example WHERE id = 42");
  console.log(`order 42: status = "${rows[0].status}", fence = ${rows[0].fence}`);
} finally {
  await pool.query("DROP TABLE IF EXISTS fenced_orders_example").catch(() => undefined);
  await Promise.all([a.close(), b.close()]);
  await pool.end();
}
