import { performance } from "node:perf_hooks";
import type * as contract from "../backend.js";
import type { ReleaseOutcome } from "../locker.js";
import { SessionBackend } from "../sql/session-backend.js";
import { POSTGRES_LOCK_LIMITS, sessionLockCapabilities } from "../sql/session-capabilities.js";
import type { SessionSlot } from "../sql/session-slot.js";
import { inspectKey } from "./inspect.js";
import { lockIdText } from "./keys.js";
import { LockerSession } from "./locker-session.js";
import type { MarkerWatcher } from "./marker-watcher.js";
import type { ResolvedPostgresLockerOptions } from "./options.js";
import type { FencingSequence, Session } from "./session.js";
import { READ, RELEASE, RELEASE_SHARED, type Row, rwMarkers, TRY, TRY_FENCED, UNMARK, WRITE } from "./statements.js";
import type { PostgresPool } from "./types.js";
import { WaitingRooms } from "./waiting-room.js";

/** A queued waiter of read-write mode that holds a marker (writers' or readers') on `session`. */
interface QueuedWaiter {
  readonly session: Session;
  readonly resource: string;
  readonly writer: boolean;
  readonly marker: [number, number];
}

const HELD: contract.AttemptOutcome = { kind: "held" };

/**
 * The backend of the PostgreSQL lockers: session advisory locks on one connection checked out of
 * the caller's pool (see `Session`), releases heard through `LISTEN`/`NOTIFY`.
 *
 * - A lock never expires on its own: it lives as long as its session. A lease's validity is how
 *   long the session is known alive (`min(lease, expiry)` from the last statement confirming it,
 *   since the server ends a session idle for `expiry`), so an extension is one `SELECT 1` per batch
 *   that renews every lease of the batch; a session that ended loses every lease on it at once
 *   ("taken" when it dropped, "expired" when the server ended it idle or it went unconfirmed).
 * - Watching a key is holding its waiter marker (a shared advisory lock on the same 64 bits as two
 *   `int4`): a release NOTIFYs the key on the locker's channel only while another session holds it.
 * - With `limit` (read-write mode) a weight below it takes the lock shared, the full weight
 *   exclusively; see READ and WRITE for the markers that keep writers from starving across sessions.
 */
export function postgresBackend(
  pool: PostgresPool,
  options: ResolvedPostgresLockerOptions,
  limit?: number,
): contract.BackendFactory {
  return (context) => new PostgresBackend(pool, options, context, limit);
}

class PostgresBackend
  extends SessionBackend<Session, ResolvedPostgresLockerOptions>
  implements contract.Backend, contract.WaitQueue, contract.Fencing
{
  readonly can: contract.Capabilities;
  readonly watcher: MarkerWatcher;
  /** Plain locks: the places this locker takes in its keys' waiting rooms (see `WaitingRooms`). */
  readonly #rooms: WaitingRooms | undefined;
  readonly #pool: PostgresPool;
  readonly #limit: number | undefined;
  /** The locker's one session, its watcher and its fencing sequence (see `LockerSession`). */
  readonly #session: LockerSession;
  protected readonly slot: SessionSlot<Session>;
  readonly #sequence: FencingSequence;
  /** Read-write mode: queued waiters holding a marker, by their id in the core. */
  readonly #queued = new Map<string, QueuedWaiter>();

  constructor(
    pool: PostgresPool,
    options: ResolvedPostgresLockerOptions,
    context: contract.BackendContext,
    limit?: number,
  ) {
    super(options);
    const { events } = context;
    this.#pool = pool;
    this.#limit = limit;
    this.#session = new LockerSession(pool, options, context, {
      // A locker queued in the key's waiting room lets the room's head try.
      notified: (key) => {
        if (this.#rooms?.hears(options.prefix + key) !== false) events.released(key);
      },
      forget: (session) => {
        for (const [id, queued] of this.#queued) if (queued.session === session) this.#queued.delete(id);
      },
      drain: async () => this.#rooms?.close(),
      firstWatcher: (resource) => this.#rooms?.enter(resource),
      lastWatcherLeft: (resource) => this.#rooms?.leave(resource),
    });
    this.slot = this.#session.slot;
    this.watcher = this.#session.watcher;
    this.#sequence = this.#session.sequence;
    this.can = sessionLockCapabilities(this, POSTGRES_LOCK_LIMITS, { permits: limit !== undefined, queue: this });
    this.#rooms =
      limit === undefined && options.waitingRooms > 0
        ? new WaitingRooms({
            pool,
            connectTimeout: options.connectTimeout,
            idleTimeout: options.expiry,
            limit: options.waitingRooms,
            wake: (resource) => events.released(resource.slice(options.prefix.length)),
            cancel: (pid) =>
              this.slot.current?.query("SELECT pg_cancel_backend($1)", [pid]) ??
              Promise.reject(new Error("no session")),
            closing: () => this.slot.closing,
            heldHere: (resource) => this.slot.current?.resources.has(resource) === true,
            waitedFor: (resource) => this.watcher.isWatched(resource),
          })
        : undefined;
  }

  /** Reads `pg_locks` and `pg_stat_activity` on a connection of its own (see `inspect.ts`). */
  inspect(resource: string): Promise<contract.StoredView> {
    const { connectTimeout, operationTimeout } = this.options;
    const settings = { pool: this.#pool, connectTimeout, operationTimeout, exclusiveWeight: this.#limit ?? 1 };
    return inspectKey(settings, resource);
  }

  /** Waiters queue in waiting rooms; a release grants the key to nobody (the room's head tries). */
  grants(): boolean {
    return false;
  }

  acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const session = this.slot.current;
    // A live session, nothing to set up first: the try's own promise is the answer.
    if (session === undefined || request.fencing || this.slot.refused) return this.#acquireAfterSetUp(request);
    return this.#try(session, request);
  }

  /** {@link acquire} once the session is open and, for a fenced attempt, the sequence made. */
  async #acquireAfterSetUp(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    this.slot.checkRefusal();
    const session = this.slot.current ?? (await this.slot.connect(request.resource));
    if (request.fencing) await this.#sequence.ensure(session, request.resource);
    return this.#try(session, request);
  }

  /** One try on `session`: a lock's, or a read-write key's. */
  #try(session: Session, request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    return this.#limit === undefined ? this.#tryLock(session, request) : this.#tryReadWrite(session, request);
  }

  /**
   * A lock: the plain `pg_try_advisory_lock` (the uncontended path: one prepared statement, one
   * parameter), with a fencing token drawn in the same statement only when asked.
   */
  async #tryLock(
    session: Session,
    { resource, duration, fencing }: contract.AttemptRequest,
  ): Promise<contract.AttemptOutcome> {
    // Held here already: session locks are re-entrant, so a try would succeed; it is a miss.
    if (session.resources.has(resource)) return HELD;
    const id = lockIdText(resource);
    session.resources.set(resource, -1);
    const sentAt = performance.now();
    let row: Row | undefined;
    try {
      [row] = await session.query<Row>(
        fencing ? TRY_FENCED : TRY,
        fencing ? [id, this.options.fencingSequence, session.token] : [id, session.token],
        "moved",
        sentAt,
      );
    } catch (error) {
      throw this.#sequence.failed(resource, error);
    } finally {
      if (row?.ok !== true) session.resources.delete(resource);
    }
    if (row?.ok !== true) {
      this.#rooms?.heldElsewhere(resource);
      return HELD;
    }
    this.#rooms?.acquired(resource);
    return this.#acquired(session, row, resource, duration, sentAt, false);
  }

  /** Read-write mode: READ or WRITE, which keep the waiters' markers (see statements.ts). */
  async #tryReadWrite(
    session: Session,
    { resource, duration, queueing, fencing, weight }: contract.AttemptRequest,
  ): Promise<contract.AttemptOutcome> {
    const id = lockIdText(resource);
    const shared = weight < (this.#limit ?? 1);
    const queued = this.#queued.get(queueing.waiterId);
    const marked = queued?.session === session;
    const join = queueing.joinOnMiss;
    // Held here already (in a mode it excludes): no try, only a counted waiter's marking.
    const taken = session.resources.get(resource) ?? 0;
    const blocked = shared ? taken < 0 : taken !== 0;
    if (blocked && !join) return this.#held(join, weight, performance.now());
    const { writers, readers } = rwMarkers(resource);
    // A waiter here that this one lets go first (a writer, for a reader not marked ahead of writers;
    // a reader ahead of writers, for a writer): the try cannot take the key.
    const defers = shared ? !marked && this.#waitingHere(resource, true) : this.#waitingHere(resource, false);
    const [statement, values] = shared
      ? [READ, [id, ...writers, ...readers, marked, join, defers, blocked, session.token]]
      : [
          WRITE,
          [
            id,
            ...writers,
            ...readers,
            join && !marked,
            marked,
            fencing,
            fencing ? this.options.fencingSequence : null,
            defers,
            blocked,
            session.token,
          ],
        ];
    // A try that may take the key counts it as taken here while in flight: a second try sent
    // meanwhile misses without asking (two tries on one session would both succeed). One that
    // defers does not: it would make the try it lets go first miss, and nothing would wake that
    // waiter again — a locker's queued writer and the reader it let go first both tried on every
    // wake-up, the writer's try made the reader's miss, and they waited for the safety net's poll.
    const marks = !blocked && !defers;
    if (marks) session.resources.set(resource, shared ? taken + 1 : -1);
    const sentAt = performance.now();
    let row: Row | undefined;
    try {
      [row] = await this.#sequence.run<Row>(session, resource, statement, values);
    } finally {
      if (marks && row?.ok !== true) this.#untake(session, resource, shared);
    }
    if (row?.ok === true) this.#queued.delete(queueing.waiterId);
    else if (!marked && (shared ? row?.marked === true : join)) {
      this.#queued.set(queueing.waiterId, { session, resource, writer: !shared, marker: shared ? readers : writers });
    }
    if (row?.ok !== true) return this.#held(join, weight, sentAt);
    return this.#acquired(session, row, resource, duration, sentAt, shared);
  }

  /** A lock taken at `sentAt`: its lease, valid for as long as the session is known alive. */
  #acquired(
    session: Session,
    row: Row,
    resource: string,
    duration: number,
    sentAt: number,
    shared: boolean,
  ): contract.AttemptOutcome {
    const handle = this.lease(resource, sentAt, duration);
    if (session.ended) return { kind: "expired-on-arrival" };
    session.holds.set(handle.token, shared);
    return row.token === undefined || row.token === null
      ? { kind: "acquired", handle }
      : { kind: "acquired", handle, fencingToken: BigInt(row.token) };
  }

  /**
   * Whether a waiter of this locker that a `reader` (or writer) must let go first queues for
   * `resource`: a writer (or a reader ahead of writers). Its marker is on this locker's own
   * session, where it conflicts with nothing: this is the same rule, applied here.
   */
  #waitingHere(resource: string, reader: boolean): boolean {
    for (const queued of this.#queued.values()) {
      if (queued.resource === resource && queued.writer === reader && queued.session === this.slot.current) return true;
    }
    return false;
  }

  /** A miss; a counted waiter is told it queued (the core then calls leaveQueue when it gives up). */
  #held(join: boolean, weight: number, sentAt: number): contract.AttemptOutcome {
    return join ? { kind: "held", registration: { token: "", weight, sentAt, serverMs: 0 } } : HELD;
  }

  /** Forgets one lock of `resource` held or tried on `session`. */
  #untake(session: Session, resource: string, shared: boolean): void {
    const count = session.resources.get(resource) ?? 0;
    if (shared && count > 1) session.resources.set(resource, count - 1);
    else session.resources.delete(resource);
  }

  release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    const session = this.slot.current;
    const shared = session?.holds.get(handle.token);
    if (session === undefined || shared === undefined) return Promise.resolve("expired");
    session.holds.delete(handle.token);
    this.#untake(session, handle.resource, shared);
    // Closed, and the last lease ran out: the session is not confirmed any more; the server frees it.
    if (this.slot.endIfLastExpired(session, handle.validUntil)) return Promise.resolve("expired");
    const key = handle.resource.slice(this.options.prefix.length);
    const answer = session.query<{ released: boolean }>(shared ? RELEASE_SHARED : RELEASE, [
      lockIdText(handle.resource),
      this.#session.channel,
      key,
      session.token,
    ]);
    return this.slot.releasedWith(session, answer, releasedRow);
  }

  async leaveQueue(_resource: string, waiterId: string): Promise<void> {
    const queued = this.#queued.get(waiterId);
    if (queued === undefined) return;
    this.#queued.delete(waiterId);
    const { session, marker } = queued;
    if (!session.ended) await session.query(UNMARK, [...marker, session.token]).catch(() => undefined);
  }

  issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    return this.#session.issueFencingToken(handle);
  }
}

/** Whether a release statement's answer says it freed the lock. */
function releasedRow([row]: Array<{ released: boolean }>): boolean {
  return row?.released === true;
}
