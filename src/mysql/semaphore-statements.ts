/**
 * The statements and lock names of {@link MySqlSemaphore}: a `GET_LOCK` lock has one holder, so a
 * key of limit N has N slots, and a permit is one slot's lock (MySQL 5.7 and MariaDB 10.0.2 let a
 * connection hold several). Each statement is one round trip and acts only on the locker's own
 * connection (`same`, see `session.ts`).
 *
 * - **Slots.** Slot `i` of a key is the lock `<base>.<i>`, `base` derived from the key (see
 *   {@link slotBase}). An attempt of weight `w` tries the slots one after another, from a random
 *   one round the circle, and stops once it took `w`; with fewer, it releases what it took: all or
 *   nothing, in one statement. The tries are the rows of a recursive CTE, each computed once from
 *   the row before it (so they run in order, and stop when the count is reached); the server
 *   materializes it once for the statement's other references. Slots this connection holds
 *   already are skipped (`GET_LOCK` is re-entrant: a second try of one would succeed).
 * - **The gate**, as PostgreSQL's (see `postgres/semaphore-statements.ts`): the first waiter of a
 *   key holds the key's gate lock while it waits, and no other connection takes a slot meanwhile.
 */
import { lockName } from "./keys.js";
import { SAME_SESSION } from "./session.js";

/** The name of slot 0 of `resource`, less its `.0` (slot `i` is `<base>.<i>`: "." is not base64url). */
export function slotBase(resource: string): string {
  return lockName(`${resource}\u0000slots`);
}

/** The name of `resource`'s gate (see the module comment). */
export function gateName(resource: string): string {
  return lockName(`${resource}\u0000gate`);
}

/** The lock name of slot `slot` of the key whose slots' base is `base`. */
export function slotName(base: string, slot: number): string {
  return `${base}.${slot}`;
}

/** What one attempt sends (see {@link takePermits}). */
export interface TakeRequest {
  /** The session's claim token (see `session.ts`). */
  readonly token: string;
  /** The key's gate name. */
  readonly gate: string;
  /** How the attempt treats the gate (`GATE` of `slot-books.ts`). */
  readonly gateMode: number;
  /** The key's slot base name. */
  readonly base: string;
  /** Slots of the key. */
  readonly limit: number;
  /** Slots to take. */
  readonly weight: number;
  /** The first slot tried. */
  readonly start: number;
  /** The slots this connection holds already, comma-separated (skipped). */
  readonly held: string;
}

/** What {@link takePermits} answers. */
export interface TakeRow {
  /** 1 when the statement ran on the session's own connection. */
  same: number;
  /** 1 when the gate let it try (held, taken or free). */
  gate: number | null;
  /** 1 when it took `weight` slots. */
  ok: number | null;
  /** The slots taken, comma-separated (meaningful when `ok`). */
  taken: string | null;
  /** The slots it found held, comma-separated. */
  busy: string | null;
}

const TAKE = `WITH RECURSIVE t(i, slot, ok, got) AS (
    SELECT -1, -1, IF(${SAME_SESSION}, CASE ? WHEN 0 THEN 1 WHEN 1 THEN COALESCE(GET_LOCK(?, 0), 0)
      ELSE COALESCE(IS_FREE_LOCK(?), 0) END, 0), 0
    UNION ALL
    SELECT i + 1, MOD(? + i + 1, ?),
      IF(FIND_IN_SET(MOD(? + i + 1, ?), ?) > 0, 0, COALESCE(GET_LOCK(CONCAT(?, '.', MOD(? + i + 1, ?)), 0), 0)),
      IF(i < 0, 0, got + ok)
    FROM t WHERE IF(i < 0, ok = 1, i + 1 < ? AND got + ok < ?)
  ), s AS (
    SELECT MAX(IF(i < 0, ok, 0)) AS gate, SUM(IF(i >= 0, ok, 0)) AS got,
      GROUP_CONCAT(IF(i >= 0 AND ok = 1, slot, NULL)) AS taken, GROUP_CONCAT(IF(i >= 0 AND ok = 0, slot, NULL)) AS busy
    FROM t
  )
  SELECT ${SAME_SESSION} AS same, s.gate, s.got >= ? AS ok, s.taken, s.busy,
    IF(s.got < ? AND s.got > 0, (SELECT SUM(RELEASE_LOCK(CONCAT(?, '.', t.slot))) FROM t WHERE t.i >= 0 AND t.ok = 1), 0) AS undone,
    IF(s.got >= ? AND s.gate = 1 AND ? < 2, RELEASE_LOCK(?), NULL) AS opened
  FROM s`;

/**
 * One attempt: the gate (as `gateMode` says), then up to `weight` slots, all or nothing; on
 * success a gate it held is given up. See the module comment.
 */
export function takePermits(request: TakeRequest): [string, unknown[]] {
  const { token, gate, gateMode, base, limit, weight, start, held } = request;
  return [
    TAKE,
    [
      token,
      gateMode,
      gate,
      gate,
      start,
      limit,
      start,
      limit,
      held,
      base,
      start,
      limit,
      limit,
      weight,
      token,
      weight,
      weight,
      base,
      weight,
      gateMode,
      gate,
    ],
  ];
}

/** A release of the slots `slots` of `base` (each once): answers how many were released. */
export function releasePermits(token: string, base: string, slots: readonly number[]): [string, unknown[]] {
  const each = slots.map(() => "(RELEASE_LOCK(?) <=> 1)").join(" + ");
  return [
    `SELECT ${SAME_SESSION} AS same, IF(${SAME_SESSION}, ${each}, NULL) AS released`,
    [token, token, ...slots.map((slot) => slotName(base, slot))],
  ];
}

/** The gate given up by a waiter that leaves. */
export function openGate(token: string, gate: string): [string, unknown[]] {
  return [`SELECT ${SAME_SESSION} AS same, IF(${SAME_SESSION}, RELEASE_LOCK(?), NULL) AS opened`, [token, token, gate]];
}

/**
 * Who holds each of the `limit` slots of `base` (the holding connection's id), one row per
 * connection with the slots it holds, and its owner from `ownerTable` when given.
 */
export function slotHolders(base: string, limit: number, ownerTable?: string): [string, unknown[]] {
  const holders = `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?)
    SELECT IS_USED_LOCK(CONCAT(?, '.', c.i)) AS holder FROM c`;
  const sql =
    ownerTable === undefined
      ? `SELECT h.holder, COUNT(*) AS weight FROM (${holders}) h WHERE h.holder IS NOT NULL GROUP BY h.holder`
      : `SELECT h.holder, COUNT(*) AS weight, MAX(o.owner) AS owner FROM (${holders}) h
          LEFT JOIN ${ownerTable} o ON o.connection_id = h.holder WHERE h.holder IS NOT NULL GROUP BY h.holder`;
  return [sql, [limit, base]];
}
