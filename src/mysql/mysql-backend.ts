import { performance } from "node:perf_hooks";
import type * as contract from "../backend.js";
import type { ReleaseOutcome } from "../locker.js";
import { SessionBackend } from "../sql/session-backend.js";
import { MYSQL_LOCK_LIMITS, sessionLockCapabilities } from "../sql/session-capabilities.js";
import type { SessionSlot } from "../sql/session-slot.js";
import { FencingTable } from "./fencing-table.js";
import { lockName } from "./keys.js";
import { LockConnection } from "./lock-connection.js";
import type { ResolvedMySqlLockerOptions } from "./options.js";
import type { ProbeWatcher } from "./probe-watcher.js";
import { isStatementError, SAME_SESSION, type Session, unavailable } from "./session.js";
import type { MySqlPool } from "./types.js";

const HELD: contract.AttemptOutcome = { kind: "held" };

/**
 * The backend of {@link MySqlLocker}: `GET_LOCK` on one lock connection checked out of the caller's
 * pool (see `Session`), releases elsewhere heard by probes (see `ProbeWatcher`).
 *
 * - A lock never expires on its own: it lives as long as its connection. A lease's validity is
 *   how long the connection is known alive (`min(lease, expiry)` from the last statement
 *   confirming it, since the server ends a connection idle for `expiry`: `wait_timeout`), so an
 *   extension is one `DO 1` per batch that renews every lease of the batch; a connection that
 *   ended loses every lease on it at once.
 * - Waiting: probes queue in a waiting room per key, and only its head waits for the key itself
 *   (see `ProbeWatcher`).
 * - Fencing tokens: a counter row per lock name, bumped on the lock connection after `GET_LOCK`
 *   succeeded, so only while the lock is held.
 */
export function mySqlBackend(pool: MySqlPool, options: ResolvedMySqlLockerOptions): contract.BackendFactory {
  return (context) => new MySqlBackend(pool, options, context);
}

class MySqlBackend
  extends SessionBackend<Session, ResolvedMySqlLockerOptions>
  implements contract.Backend, contract.Fencing
{
  readonly can: contract.Capabilities = sessionLockCapabilities(this, MYSQL_LOCK_LIMITS);
  readonly watcher: ProbeWatcher;
  readonly #fencing: FencingTable;
  /** The locker's one lock connection (see `SessionSlot`). */
  protected readonly slot: SessionSlot<Session>;

  constructor(pool: MySqlPool, options: ResolvedMySqlLockerOptions, context: contract.BackendContext) {
    super(options);
    const connection = new LockConnection(pool, options, context, {
      heldHere: (resource) => this.slot.current?.resources.has(resource) === true,
    });
    this.slot = connection.slot;
    this.watcher = connection.watcher;
    this.#fencing = new FencingTable(options.fencingTable);
  }

  async acquire({ resource, duration, fencing, queueing }: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    this.slot.checkRefusal();
    // A probe of ours cancelled a moment ago may still hold the key for a round trip: a try that
    // does not wait must not miss for it (a waiter hears the probe's release).
    const stopping = queueing.joinOnMiss ? undefined : this.watcher.stopping(resource);
    if (stopping !== undefined) await stopping;
    const session = await this.slot.connect(resource);
    if (fencing) await this.#fencing.ensure(session, resource);
    // Held or tried here already: GET_LOCK is re-entrant on a connection, so no try.
    if (session.resources.has(resource)) return HELD;
    session.resources.add(resource);
    const name = lockName(resource);
    const sentAt = performance.now();
    let taken = false;
    try {
      const [row] = await session.query<Array<{ ok: unknown }>>(
        `SELECT IF(${SAME_SESSION}, GET_LOCK(?, 0), NULL) AS ok, ${SAME_SESSION} AS same`,
        [session.token, name, session.token],
      );
      taken = row?.ok === 1;
    } catch (error) {
      throw unavailable(resource, error);
    } finally {
      if (!taken) session.resources.delete(resource);
    }
    if (!taken) {
      this.watcher.heldElsewhere(resource);
      return HELD;
    }
    this.watcher.acquiredHere(resource);
    if (session.ended) return { kind: "expired-on-arrival" };
    const handle = this.lease(resource, sentAt, duration);
    session.holds.set(handle.token, resource);
    if (!fencing) return { kind: "acquired", handle };
    return this.#fencing.fenced(session, handle, name, this);
  }

  release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    const session = this.slot.current;
    if (session === undefined || !session.holds.has(handle.token)) return Promise.resolve("expired");
    session.holds.delete(handle.token);
    session.resources.delete(handle.resource);
    // Closed, and the last lease ran out: the connection is not confirmed any more; drop it.
    if (this.slot.endIfLastExpired(session, handle.validUntil)) return Promise.resolve("expired");
    const freed = session
      .query<Array<{ released: unknown }>>(
        `SELECT IF(${SAME_SESSION}, RELEASE_LOCK(?), NULL) AS released, ${SAME_SESSION} AS same`,
        [session.token, lockName(handle.resource), session.token],
      )
      .then(([row]) => row?.released === 1);
    return this.slot.released(session, freed);
  }

  issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    return this.#fencing.issue(this.slot.current, handle, () => lockName(handle.resource));
  }

  /**
   * Who holds `resource` (the holding connection's owner row) and how many sessions wait for it in
   * `GET_LOCK` on its name or its waiting room, whose name contains it (this process's probes and
   * anyone's blocking calls, as far as the processlist shows them to this user). Reads only.
   */
  async inspect(resource: string): Promise<contract.StoredView> {
    const session = await this.slot.connect(resource);
    const name = lockName(resource);
    const waiting =
      "(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND LOCATE(?, INFO) > 0)";
    const withOwner = `SELECT IS_USED_LOCK(?) AS holder, ${waiting} AS waiting,
      (SELECT owner FROM ${this.options.ownerTable} WHERE connection_id = IS_USED_LOCK(?)) AS owner`;
    let row: { holder: unknown; waiting: unknown; owner?: unknown } | undefined;
    try {
      try {
        [row] = await session.query<Array<typeof row>>(withOwner, [name, name, name]);
      } catch (error) {
        if (!isStatementError(error)) throw error;
        // No owner table (or no right to read it): the holder's owner is unknown.
        [row] = await session.query<Array<typeof row>>(`SELECT IS_USED_LOCK(?) AS holder, ${waiting} AS waiting`, [
          name,
          name,
        ]);
      }
    } catch (error) {
      throw unavailable(resource, error);
    }
    const waitingCount = Number(row?.waiting ?? 0);
    if (row?.holder === null || row?.holder === undefined) return { holders: [], waiting: waitingCount };
    const owner = typeof row.owner === "string" ? row.owner : "";
    return { holders: [{ owner, weight: 1, expiresInMs: Number.POSITIVE_INFINITY }], waiting: waitingCount };
  }
}
