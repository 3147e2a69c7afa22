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
  /**
   * The column of its answer that is NULL when it ran on a server connection that is not the
   * session's (see pooler.ts); without one, the claim check's answer is its `same` column.
   */
  readonly claim?: string;
}

/** `text` as a {@link Statement}, named after its text; `claim`: see {@link Statement.claim}. */
export function prepared(text: string, claim?: string): Statement {
  const name = `globallock_${createHash("sha256").update(text, "utf8").digest("hex").slice(0, 16)}`;
  return claim === undefined ? { name, text } : { name, text, claim };
}

/** A call of a {@link Statement} as `pg` takes it (see {@link callOf}). */
export interface StatementCall {
  readonly name: string;
  readonly text: string;
  values: unknown[] | undefined;
}

/**
 * A call of `statement` with `values`: an object whose own property is `values` alone, its name
 * and text inherited from `statement`. `pg` copies each query's own properties one by one through
 * their descriptors (so as not to change the caller's object), which costs far more per property
 * than the rest of its bookkeeping; it keeps the prototype, and reads the text through it (query
 * objects with an inherited `text` getter are a use it supports).
 */
export function callOf(statement: Statement, values: unknown[] | undefined): StatementCall {
  const call = Object.create(statement) as StatementCall;
  call.values = values;
  return call;
}

/**
 * Whether `row`, the first row `statement` answered, says that it ran on a server connection that
 * is not the session's (it then touched nothing): its claim column NULL, or its `same` column not
 * true. A statement that answers neither is not a claim check.
 */
export function ranElsewhere(statement: string | Statement, row: Record<string, unknown>): boolean {
  const claim = typeof statement === "string" ? undefined : statement.claim;
  return claim === undefined ? "same" in row && row.same !== true : row[claim] === null;
}

/*
 * Every statement below that a held lock depends on takes the session's claim token as its last
 * parameter and runs its lock functions only on the session's own server connection (see
 * pooler.ts): through a transaction pooler it touches nothing elsewhere. Where one column can say
 * both what the statement did and where it ran, that column is its claim: NULL there means "ran on
 * another session", which none of its lock functions answers (given non-NULL arguments, each
 * answers true or false); the other statements answer `same`.
 */

/** A lock: one plain try (the uncontended path: the floor's own statement), answering `ok`. */
export const TRY = prepared(`SELECT CASE WHEN ${sameSession(2)} THEN pg_try_advisory_lock($1::bigint) END AS ok`, "ok");
/** A lock with a fencing token (`$2` the sequence), drawn only when the lock was taken. */
export const TRY_FENCED = prepared(
  `WITH t AS MATERIALIZED (SELECT CASE WHEN ${sameSession(3)} THEN pg_try_advisory_lock($1::bigint) END AS ok)
  SELECT t.ok, CASE WHEN t.ok THEN nextval($2::regclass)::text END AS token FROM t`,
  "ok",
);

/**
 * A reader (read-write mode): takes the lock shared unless a writer waits in another session (the
 * writers' marker is held), or this waiter is ahead of such writers (it holds the readers'
 * marker). Failing while no writer waits, a queued reader takes the readers' marker; taking the
 * lock, it drops it. CTEs are materialized and chained: they run in this order, once each.
 */
export const READ = prepared(
  `WITH s AS MATERIALIZED (SELECT ${sameSession(10)} AS same),
  w AS MATERIALIZED (
    SELECT s.same, CASE WHEN NOT s.same THEN false WHEN $6::boolean THEN true WHEN $8::boolean THEN false
      ELSE pg_try_advisory_xact_lock($2::int, $3::int) END AS may FROM s
  ), t AS MATERIALIZED (
    SELECT w.may, CASE WHEN NOT w.same THEN NULL WHEN w.may AND NOT $9::boolean THEN pg_try_advisory_lock_shared($1::bigint)
      ELSE false END AS ok FROM w
  )
  SELECT t.ok,
    CASE WHEN NOT t.ok AND t.may AND $7::boolean AND NOT $6::boolean THEN pg_try_advisory_lock_shared($4::int, $5::int)
         WHEN t.ok AND $6::boolean THEN NOT pg_advisory_unlock_shared($4::int, $5::int) END AS marked
  FROM t`,
  "ok",
);

/**
 * A writer (read-write mode): a queued writer first takes the writers' marker (shared: many
 * writers may wait), then takes the lock exclusively unless a reader ahead of it waits in another
 * session; taking it, it drops its marker and draws a fencing token when asked.
 */
export const WRITE = prepared(
  `WITH s AS MATERIALIZED (SELECT ${sameSession(12)} AS same),
  m AS MATERIALIZED (
    SELECT s.same, CASE WHEN s.same AND $6::boolean THEN pg_advisory_lock_shared($2::int, $3::int) IS NULL END AS marked FROM s
  ), r AS MATERIALIZED (
    SELECT m.same, CASE WHEN NOT m.same OR $10::boolean THEN false ELSE pg_try_advisory_xact_lock($4::int, $5::int) END AS free FROM m
  ), t AS MATERIALIZED (
    SELECT CASE WHEN NOT r.same THEN NULL WHEN r.free AND NOT $11::boolean THEN pg_try_advisory_lock($1::bigint)
      ELSE false END AS ok FROM r
  )
  SELECT t.ok, CASE WHEN t.ok AND ($6::boolean OR $7::boolean) THEN NOT pg_advisory_unlock_shared($2::int, $3::int) END AS marked,
    CASE WHEN t.ok AND $8::boolean THEN nextval($9::regclass)::text END AS token
  FROM t`,
  "ok",
);

/**
 * A release (`$1` the lock id, `$2` the channel, `$3` the key, `$4` the claim token): unlocks, then
 * NOTIFYs only when a waiter in another session holds the key's marker — the same 64 bits as two
 * `int4` (see `markerOf`), computed here from `$1`: its high half, and its low half (`bit(32)`
 * keeps the low 32 bits). A session's own marker never conflicts with its own try, so waiters of
 * this locker (which the lock core wakes) cost no NOTIFY. The check is a lock-table probe on the
 * server in the same round trip: it is what lets a waiter in another process sleep until the release.
 * It answers `released` alone (NULL: it ran on another session, and neither unlocked nor notified).
 */
function release(unlock: string): Statement {
  return prepared(
    `WITH u AS MATERIALIZED (SELECT CASE WHEN ${sameSession(4)} THEN ${unlock}($1::bigint) END AS released),
  n AS MATERIALIZED (
    SELECT u.released,
      CASE WHEN u.released IS NULL OR pg_try_advisory_xact_lock(($1::bigint >> 32)::int, $1::bigint::bit(32)::int) THEN NULL
        ELSE pg_notify($2, $3) END AS notified
    FROM u
  )
  SELECT n.released FROM n`,
    "released",
  );
}
export const RELEASE = release("pg_advisory_unlock");
export const RELEASE_SHARED = release("pg_advisory_unlock_shared");
export const MARK = prepared(
  `SELECT CASE WHEN ${sameSession(3)} THEN pg_advisory_lock_shared($1::int, $2::int) IS NULL END AS marked`,
  "marked",
);
export const UNMARK = prepared(
  `SELECT CASE WHEN ${sameSession(3)} THEN pg_advisory_unlock_shared($1::int, $2::int) END AS unmarked`,
  "unmarked",
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
