import { createHash } from "node:crypto";
import { lockId, markerOf } from "./keys.js";
import { sameSession } from "./pooler.js";

/**
 * The statements of the PostgreSQL backend. Each is one round trip; where a statement chains
 * several lock functions, its CTEs are materialized and chained, so they run in order, once each.
 *
 * Those of the lock path are named prepared statements ({@link Statement}): the server parses and
 * plans each once per connection, and each call sends only its parameters.
 */

/**
 * A named prepared statement. Its name is derived from its text, so that two versions of this
 * package sharing one pool never give one name two texts (which `pg` refuses).
 */
export interface Statement {
  /** `globallock_` and the first 16 hex digits of the text's SHA-256. */
  readonly name: string;
  /** The SQL. */
  readonly text: string;
}

/** `text` as a {@link Statement}, named after its text. */
export function prepared(text: string): Statement {
  return { name: `globallock_${createHash("sha256").update(text, "utf8").digest("hex").slice(0, 16)}`, text };
}

/*
 * Every statement below that a held lock depends on takes the session's claim token as its last
 * parameter and runs its lock functions only on the session's own server connection, answering
 * `same` (see pooler.ts): through a transaction pooler it touches nothing elsewhere.
 */

/** A lock: one plain try (the uncontended path: the floor's own statement), answering `ok`. */
export const TRY = prepared(
  `SELECT CASE WHEN ${sameSession(2)} THEN pg_try_advisory_lock($1::bigint) END AS ok, ${sameSession(2)} AS same`,
);
/** A lock with a fencing token (`$2` the sequence), drawn only when the lock was taken. */
export const TRY_FENCED = prepared(`WITH s AS MATERIALIZED (SELECT ${sameSession(3)} AS same),
  t AS MATERIALIZED (SELECT s.same, CASE WHEN s.same THEN pg_try_advisory_lock($1::bigint) END AS ok FROM s)
  SELECT t.same, t.ok, CASE WHEN t.ok THEN nextval($2::regclass)::text END AS token FROM t`);

/**
 * A reader (read-write mode): takes the lock shared unless a writer waits in another session (the
 * writers' marker is held), or this waiter is ahead of such writers (it holds the readers'
 * marker). Failing while no writer waits, a queued reader takes the readers' marker; taking the
 * lock, it drops it. CTEs are materialized and chained: they run in this order, once each.
 */
export const READ = prepared(`WITH s AS MATERIALIZED (SELECT ${sameSession(10)} AS same),
  w AS MATERIALIZED (
    SELECT s.same, CASE WHEN NOT s.same THEN false WHEN $6::boolean THEN true WHEN $8::boolean THEN false
      ELSE pg_try_advisory_xact_lock($2::int, $3::int) END AS may FROM s
  ), t AS MATERIALIZED (
    SELECT w.same, w.may, CASE WHEN w.may AND NOT $9::boolean THEN pg_try_advisory_lock_shared($1::bigint) ELSE false END AS ok FROM w
  )
  SELECT t.same, t.ok, NULL::text AS token,
    CASE WHEN NOT t.ok AND t.may AND $7::boolean AND NOT $6::boolean THEN pg_try_advisory_lock_shared($4::int, $5::int)
         WHEN t.ok AND $6::boolean THEN NOT pg_advisory_unlock_shared($4::int, $5::int) END AS marked
  FROM t`);

/**
 * A writer (read-write mode): a queued writer first takes the writers' marker (shared: many
 * writers may wait), then takes the lock exclusively unless a reader ahead of it waits in another
 * session; taking it, it drops its marker and draws a fencing token when asked.
 */
export const WRITE = prepared(`WITH s AS MATERIALIZED (SELECT ${sameSession(12)} AS same),
  m AS MATERIALIZED (
    SELECT s.same, CASE WHEN s.same AND $6::boolean THEN pg_advisory_lock_shared($2::int, $3::int) IS NULL END AS marked FROM s
  ), r AS MATERIALIZED (
    SELECT m.same, CASE WHEN NOT m.same OR $10::boolean THEN false ELSE pg_try_advisory_xact_lock($4::int, $5::int) END AS free FROM m
  ), t AS MATERIALIZED (
    SELECT r.same, CASE WHEN r.free AND NOT $11::boolean THEN pg_try_advisory_lock($1::bigint) ELSE false END AS ok FROM r
  )
  SELECT t.same, t.ok, CASE WHEN t.ok AND ($6::boolean OR $7::boolean) THEN NOT pg_advisory_unlock_shared($2::int, $3::int) END AS marked,
    CASE WHEN t.ok AND $8::boolean THEN nextval($9::regclass)::text END AS token
  FROM t`);

/**
 * A release (`$1` the lock id, `$2` the channel, `$3` the key, `$4` the claim token): unlocks, then
 * NOTIFYs only when a waiter in another session holds the key's marker — the same 64 bits as two
 * `int4` (see `markerOf`), computed here from `$1`: its high half, and its low half (`bit(32)`
 * keeps the low 32 bits). A session's own marker never conflicts with its own try, so waiters of
 * this locker (which the lock core wakes) cost no NOTIFY. The check is a lock-table probe on the
 * server in the same round trip: it is what lets a waiter in another process sleep until the release.
 */
function release(unlock: string): Statement {
  return prepared(`WITH s AS MATERIALIZED (SELECT ${sameSession(4)} AS same),
  u AS MATERIALIZED (SELECT s.same, CASE WHEN s.same THEN ${unlock}($1::bigint) END AS released FROM s)
  SELECT u.same, u.released,
    CASE WHEN NOT u.same OR pg_try_advisory_xact_lock(($1::bigint >> 32)::int, $1::bigint::bit(32)::int) THEN NULL
      ELSE pg_notify($2, $3) END AS notified
  FROM u`);
}
export const RELEASE = release("pg_advisory_unlock");
export const RELEASE_SHARED = release("pg_advisory_unlock_shared");
export const MARK = prepared(
  `SELECT CASE WHEN ${sameSession(3)} THEN pg_advisory_lock_shared($1::int, $2::int) IS NULL END AS marked, ${sameSession(3)} AS same`,
);
export const UNMARK = prepared(
  `SELECT CASE WHEN ${sameSession(3)} THEN pg_advisory_unlock_shared($1::int, $2::int) END AS unmarked, ${sameSession(3)} AS same`,
);
/** Confirms the session (the extensions' and the idle session's statement). */
export const PING = prepared(`SELECT ${sameSession(1)} AS same`);

/** What an attempt answers. */
export interface Row {
  /** Null when the statement ran on another server connection (it then touched nothing). */
  ok: boolean | null;
  /** The fencing token (TRY_FENCED, WRITE); absent from TRY and READ. */
  token?: string | null;
  marked?: boolean | null;
}

/** The markers of a read-write key: writers waiting, readers ahead of them. */
export function rwMarkers(resource: string): { writers: [number, number]; readers: [number, number] } {
  return { writers: markerOf(lockId(`${resource}\u0000w`)), readers: markerOf(lockId(`${resource}\u0000r`)) };
}
