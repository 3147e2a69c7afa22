/**
 * `inspect` on PostgreSQL: who holds a key's advisory lock and who waits for it, read from
 * `pg_locks` (every session's advisory locks) joined with `pg_stat_activity` (each session's
 * `application_name`, which a locker's session sets to its `owner`; see `session.ts`). One
 * statement, on a connection checked out of the pool for it (not the locker's session, so a slow
 * answer cannot end the session that holds the leases).
 *
 * - **Holders**: granted locks on the key's 64-bit id (`objsubid` 1), one per session — a session
 *   holding the lock shared several times (several read leases of one locker) is one holder.
 *   `ExclusiveLock` is a lock (or a writer), `ShareLock` a reader.
 * - **Waiting**: sessions watching the key (holding its waiter marker shared: the same 64 bits as
 *   two `int4`, `objsubid` 2; see `marker-watcher.ts`), plus sessions blocked in a plain
 *   `pg_advisory_lock` on it (not granted). A session counts once, however many of its callers wait.
 * - **Time left** is `Infinity`: a session lock does not run out; it lasts until it is released or
 *   its session ends (a locker's lease is its own, local, bound on that session being alive).
 * - **Fencing tokens** are not kept per holder (one sequence per locker draws them), so none is shown.
 */
import type { StoredHolder, StoredView } from "../backend.js";
import { withTimeout } from "../internal/sleep.js";
import { checkOutFor } from "../sql/sql-errors.js";
import { lockId, markerOf } from "./keys.js";
import { unavailable } from "./session.js";
import type { PostgresPool } from "./types.js";

/** One advisory lock row of a key (its lock or its waiter marker). */
interface LockRow {
  pid: number;
  mode: string;
  granted: boolean;
  objsubid: number;
  owner: string | null;
}

const LOCKS = `SELECT l.pid, l.mode, l.granted, l.objsubid::int AS objsubid, a.application_name AS owner
  FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid IN (1, 2)`;

/** What {@link inspectKey} needs: the pool, and how long to wait for a connection and an answer. */
export interface InspectSettings {
  readonly pool: PostgresPool;
  readonly connectTimeout: number;
  readonly operationTimeout: number;
  /** A writer's weight (the read-write locker's limit); 1 for locks. */
  readonly exclusiveWeight: number;
}

/** Who holds `resource` and how many sessions wait for it (see the module comment). */
export async function inspectKey(settings: InspectSettings, resource: string): Promise<StoredView> {
  const [high, low] = markerOf(lockId(resource));
  const rows = await query<LockRow>(settings, resource, LOCKS, [String(high >>> 0), String(low >>> 0)]);
  const holders: StoredHolder[] = [];
  const waiting = new Set<number>();
  for (const row of rows) {
    if (row.objsubid === 1 && row.granted) {
      const exclusive = row.mode === "ExclusiveLock";
      holders.push({
        owner: row.owner ?? "",
        weight: exclusive ? settings.exclusiveWeight : 1,
        expiresInMs: Number.POSITIVE_INFINITY,
      });
    } else if (row.objsubid === 1 || (row.granted && row.mode === "ShareLock")) {
      // Blocked on the lock itself, or watching it (its marker held shared; a release's brief
      // exclusive try of the marker is not a waiter).
      waiting.add(row.pid);
    }
  }
  return { holders, waiting: waiting.size };
}

/** One advisory lock row of a semaphore's key: a slot (`objsubid` 1) or its waiter marker (2). */
interface SlotRow extends LockRow {
  classid: string;
  objid: string;
}

const SLOT_LOCKS = `SELECT l.pid, l.mode, l.granted, l.objsubid::int AS objsubid, l.classid::text AS classid,
    l.objid::text AS objid, a.application_name AS owner
  FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND ((l.objsubid = 1 AND l.classid = ANY($1::oid[])) OR (l.objsubid = 2 AND l.classid = $2::oid AND l.objid = $3::oid))`;

/**
 * Who holds `resource`, a `PostgresSemaphore`'s key of `limit` slots from `base` (see
 * `semaphore-statements.ts`), and how many sessions wait for it: each session holding slots is one
 * holder, its weight the slots it holds (several leases of one locker add up); waiting are the
 * sessions watching the key, as for a lock (see the module comment).
 */
export async function inspectSlots(
  settings: InspectSettings,
  resource: string,
  base: bigint,
  limit: number,
): Promise<StoredView> {
  const last = base + BigInt(limit - 1);
  const highs = [...new Set([base >> 32n, last >> 32n])].map((high) => BigInt.asUintN(32, high).toString());
  const [markerHigh, markerLow] = markerOf(lockId(resource));
  const rows = await query<SlotRow>(settings, resource, SLOT_LOCKS, [
    highs,
    String(markerHigh >>> 0),
    String(markerLow >>> 0),
  ]);
  const held = new Map<number, { owner: string; weight: number }>();
  const waiting = new Set<number>();
  for (const row of rows) {
    if (row.objsubid === 2) {
      if (row.granted && row.mode === "ShareLock") waiting.add(row.pid);
      continue;
    }
    const id = BigInt.asIntN(64, (BigInt(row.classid) << 32n) | BigInt(row.objid));
    if (!row.granted || id < base || id > last) continue;
    const holder = held.get(row.pid) ?? { owner: row.owner ?? "", weight: 0 };
    holder.weight += 1;
    held.set(row.pid, holder);
  }
  const holders = [...held.values()].map(({ owner, weight }) => ({
    owner,
    weight,
    expiresInMs: Number.POSITIVE_INFINITY,
  }));
  return { holders, waiting: waiting.size };
}

/** Runs one statement on a connection checked out for it; failures are StoreUnavailableErrors. */
async function query<R>(settings: InspectSettings, resource: string, text: string, values: unknown[]): Promise<R[]> {
  const { pool, connectTimeout, operationTimeout } = settings;
  const client = await checkOutFor("PostgreSQL", pool.connect(), connectTimeout, resource);
  try {
    const result = await withTimeout(
      client.query({ text, values }),
      operationTimeout,
      () => new Error(`PostgreSQL did not answer within ${operationTimeout} ms`),
    );
    client.release();
    return result.rows as R[];
  } catch (error) {
    client.release(error instanceof Error ? error : true);
    throw unavailable(resource, error);
  }
}
