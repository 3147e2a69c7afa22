/**
 * The statements and lock ids of {@link PostgresSemaphore}: advisory locks cannot count, so a key
 * of limit N has N slots, and a permit is one slot's advisory lock. Each statement is one round
 * trip; its CTEs are materialized and chained, so they run in order, once each (see statements.ts
 * for the claim check every one of them makes, `same`).
 *
 * - **Slots.** Slot `i` of a key is the advisory lock `base + i` (bigint), `base` derived from the
 *   key (see {@link slotBase}). An attempt of weight `w` tries the slots one after another, from a
 *   random one round the circle (so that sessions rarely try the same slot at once), and stops
 *   once it took `w`; with fewer, it unlocks what it took: all or nothing, in one statement.
 *   Slots this session holds already are skipped (session locks are re-entrant: a second try of
 *   one would succeed).
 * - **The gate.** Try-locks jump any queue: on their own, a stream of light holders would starve a
 *   heavy waiter for ever. So the first waiter of a key takes its gate (an exclusive session
 *   advisory lock beside the slots) and keeps it while it waits; while another session holds the
 *   gate, no attempt takes a slot. The gate holder gives it up once it got in (or gave up), and
 *   the waiters race for it again: the heaviest waiter is served once it holds the gate, since
 *   the holders then only leave.
 * - **Wake-ups.** A release (of slots, or of the gate) NOTIFYs the key when another session holds
 *   its waiter marker (see `marker-watcher.ts`).
 */
import { lockId } from "./keys.js";
import { sameSession } from "./pooler.js";
import { prepared } from "./statements.js";

/** The largest bigint: the last slot of a key must not pass it. */
const MAX_BIGINT = 2n ** 63n - 1n;

/** The lock id of slot 0 of `resource`'s `limit` slots (slot `i` is `base + i`). */
export function slotBase(resource: string, limit: number): bigint {
  const base = lockId(`${resource}\u0000slots`);
  return base > MAX_BIGINT - BigInt(limit) ? base - BigInt(limit) : base;
}

/** The lock id of `resource`'s gate (see the module comment). */
export function gateId(resource: string): bigint {
  return lockId(`${resource}\u0000gate`);
}

/**
 * One attempt: `$1` the slot base, `$2` the limit, `$3` the weight, `$4` the first slot tried,
 * `$5` the slots this session holds (skipped), `$6` the gate's id, `$7` the gate mode (`GATE` of
 * `slot-books.ts`), `$8` whether to draw a fencing token from the sequence `$9`, `$10`/`$11` the
 * waiter marker, `$12` the channel, `$13` the key (a NOTIFY when it opens the gate), `$14` the
 * claim token.
 * Answers `ok`, the slots `taken`, `head` (it holds the gate now), and the fencing `token`.
 */
export const TAKE_PERMITS = prepared(`WITH RECURSIVE s AS MATERIALIZED (SELECT ${sameSession(14)} AS same),
  g AS MATERIALIZED (
    SELECT s.same, CASE WHEN NOT s.same THEN false WHEN $7::int = 0 THEN true
      WHEN $7::int = 1 THEN pg_try_advisory_lock($6::bigint) ELSE pg_try_advisory_xact_lock($6::bigint) END AS gate
    FROM s
  ), t(i, got, taken) AS (
    SELECT 0, 0, ARRAY[]::int[] FROM g WHERE g.gate
    UNION ALL
    SELECT t.i + 1, t.got + x.ok::int, CASE WHEN x.ok THEN t.taken || x.slot ELSE t.taken END
    FROM t CROSS JOIN LATERAL (
      SELECT q.slot, CASE WHEN q.slot = ANY($5::int[]) THEN false ELSE pg_try_advisory_lock($1::bigint + q.slot) END AS ok
      FROM (SELECT ($4::int + t.i) % $2::int AS slot OFFSET 0) q
    ) x
    WHERE t.i < $2::int AND t.got < $3::int
  ), f AS MATERIALIZED (SELECT t.got, t.taken FROM t ORDER BY t.i DESC LIMIT 1),
  u AS MATERIALIZED (
    SELECT g.same, g.gate, coalesce(f.got, 0) AS got, coalesce(f.taken, ARRAY[]::int[]) AS taken FROM g LEFT JOIN f ON true
  ), r AS MATERIALIZED (
    SELECT u.same, u.gate, u.got >= $3::int AS ok, u.taken,
      CASE WHEN u.got < $3::int AND u.got > 0 THEN
        (SELECT count(*) FROM unnest(u.taken) AS k(slot) WHERE pg_advisory_unlock($1::bigint + k.slot)) END AS undone
    FROM u
  ), v AS MATERIALIZED (
    SELECT r.same, r.gate, r.ok, r.taken,
      CASE WHEN r.ok AND r.gate AND $7::int < 2 THEN pg_advisory_unlock($6::bigint) ELSE false END AS opened
    FROM r
  )
  SELECT v.same, v.ok, CASE WHEN v.ok THEN v.taken END AS taken, v.gate AND NOT v.ok AND $7::int < 2 AS head,
    CASE WHEN v.ok AND $8::boolean THEN nextval($9::regclass)::text END AS token,
    CASE WHEN NOT v.opened THEN NULL WHEN pg_try_advisory_xact_lock($10::int, $11::int) THEN NULL
      ELSE pg_notify($12, $13) END AS notified
  FROM v`);

/**
 * A release: unlocks the slots `$2` (of base `$1`), then NOTIFYs the key `$6` on channel `$5` when
 * another session holds its waiter marker `$3`/`$4`; `$7` the claim token.
 */
export const RELEASE_PERMITS = prepared(`WITH s AS MATERIALIZED (SELECT ${sameSession(7)} AS same),
  u AS MATERIALIZED (
    SELECT s.same, CASE WHEN s.same THEN
      (SELECT bool_and(pg_advisory_unlock($1::bigint + k.slot)) FROM unnest($2::int[]) AS k(slot)) END AS released
    FROM s
  )
  SELECT u.same, u.released,
    CASE WHEN NOT u.same OR pg_try_advisory_xact_lock($3::int, $4::int) THEN NULL ELSE pg_notify($5, $6) END AS notified
  FROM u`);

/**
 * The gate given up by a waiter that leaves: unlocks the gate `$1`, then NOTIFYs the key `$5` on
 * channel `$4` when another session holds its waiter marker `$2`/`$3`; `$6` the claim token.
 */
export const OPEN_GATE = prepared(`WITH s AS MATERIALIZED (SELECT ${sameSession(6)} AS same),
  u AS MATERIALIZED (SELECT s.same, CASE WHEN s.same THEN pg_advisory_unlock($1::bigint) END AS opened FROM s)
  SELECT u.same, u.opened,
    CASE WHEN u.opened IS NOT TRUE OR pg_try_advisory_xact_lock($2::int, $3::int) THEN NULL ELSE pg_notify($4, $5) END AS notified
  FROM u`);

/** What {@link TAKE_PERMITS} answers. */
export interface TakeRow {
  /** Null when the statement ran on another server connection (it then touched nothing). */
  ok: boolean | null;
  /** The slots taken (when `ok`). */
  taken: number[] | null;
  /** The attempt holds the key's gate now (it waits first in line). */
  head: boolean | null;
  /** The fencing token, when asked and taken. */
  token: string | null;
}
