import { lockId, markerOf } from "./keys.js";

/**
 * The statements of the PostgreSQL backend. Each is one round trip; where a statement chains
 * several lock functions, its CTEs are materialized and chained, so they run in order, once each.
 */

/** A lock: one plain try (the uncontended path), or with a fencing token drawn only when taken. */
export const TRY = "SELECT pg_try_advisory_lock($1::bigint) AS ok, NULL::text AS token";
export const TRY_FENCED = `WITH t AS MATERIALIZED (SELECT pg_try_advisory_lock($1::bigint) AS ok)
  SELECT t.ok, CASE WHEN t.ok THEN nextval($2::regclass)::text END AS token FROM t`;

/**
 * A reader (read-write mode): takes the lock shared unless a writer waits in another session (the
 * writers' marker is held), or this waiter is ahead of such writers (it holds the readers'
 * marker). Failing while no writer waits, a queued reader takes the readers' marker; taking the
 * lock, it drops it. CTEs are materialized and chained: they run in this order, once each.
 */
export const READ = `WITH w AS MATERIALIZED (
    SELECT CASE WHEN $6::boolean THEN true WHEN $8::boolean THEN false
      ELSE pg_try_advisory_xact_lock($2::int, $3::int) END AS may
  ), t AS MATERIALIZED (
    SELECT w.may, CASE WHEN w.may AND NOT $9::boolean THEN pg_try_advisory_lock_shared($1::bigint) ELSE false END AS ok FROM w
  )
  SELECT t.ok, NULL::text AS token,
    CASE WHEN NOT t.ok AND t.may AND $7::boolean AND NOT $6::boolean THEN pg_try_advisory_lock_shared($4::int, $5::int)
         WHEN t.ok AND $6::boolean THEN NOT pg_advisory_unlock_shared($4::int, $5::int) END AS marked
  FROM t`;

/**
 * A writer (read-write mode): a queued writer first takes the writers' marker (shared: many
 * writers may wait), then takes the lock exclusively unless a reader ahead of it waits in another
 * session; taking it, it drops its marker and draws a fencing token when asked.
 */
export const WRITE = `WITH m AS MATERIALIZED (
    SELECT CASE WHEN $6::boolean THEN pg_advisory_lock_shared($2::int, $3::int) IS NULL END AS marked
  ), r AS MATERIALIZED (
    SELECT CASE WHEN $10::boolean THEN false ELSE pg_try_advisory_xact_lock($4::int, $5::int) END AS free FROM m
  ), t AS MATERIALIZED (
    SELECT CASE WHEN r.free AND NOT $11::boolean THEN pg_try_advisory_lock($1::bigint) ELSE false END AS ok FROM r
  )
  SELECT t.ok, CASE WHEN t.ok AND ($6::boolean OR $7::boolean) THEN NOT pg_advisory_unlock_shared($2::int, $3::int) END AS marked,
    CASE WHEN t.ok AND $8::boolean THEN nextval($9::regclass)::text END AS token
  FROM t`;

/** A release: unlocks, then NOTIFYs only when a waiter in another session holds the key's marker. */
const NOTIFY = "CASE WHEN pg_try_advisory_xact_lock($2::int, $3::int) THEN NULL ELSE pg_notify($4, $5) END AS notified";
export const RELEASE = `SELECT pg_advisory_unlock($1::bigint) AS released, ${NOTIFY}`;
export const RELEASE_SHARED = `SELECT pg_advisory_unlock_shared($1::bigint) AS released, ${NOTIFY}`;
export const MARK = "SELECT pg_advisory_lock_shared($1::int, $2::int) IS NULL AS marked";
export const UNMARK = "SELECT pg_advisory_unlock_shared($1::int, $2::int)";

/** What an attempt answers. */
export interface Row {
  ok: boolean;
  token: string | null;
  marked?: boolean | null;
}

/** The markers of a read-write key: writers waiting, readers ahead of them. */
export function rwMarkers(resource: string): { writers: [number, number]; readers: [number, number] } {
  return { writers: markerOf(lockId(`${resource}\u0000w`)), readers: markerOf(lockId(`${resource}\u0000r`)) };
}
