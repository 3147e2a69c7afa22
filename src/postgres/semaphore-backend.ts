import { performance } from "node:perf_hooks";
import type * as contract from "../backend.js";
import { POSTGRES_LOCK_LIMITS } from "../sql/session-capabilities.js";
import type { SessionSlot } from "../sql/session-slot.js";
import type { GateMode, HeldSlots, SlotKey } from "../sql/slot-books.js";
import { SlotSemaphoreBackend } from "../sql/slot-semaphore-backend.js";
import { inspectSlots } from "./inspect.js";
import { lockId, markerOf } from "./keys.js";
import { LockerSession } from "./locker-session.js";
import type { MarkerWatcher } from "./marker-watcher.js";
import type { ResolvedPostgresLockerOptions } from "./options.js";
import { gateId, OPEN_GATE, RELEASE_PERMITS, slotBase, TAKE_PERMITS, type TakeRow } from "./semaphore-statements.js";
import type { Session } from "./session.js";
import type { PostgresPool } from "./types.js";

/** What this locker keeps of a key: its slots' ids, its waiters here in arrival order, the gate. */
interface KeyState extends SlotKey {
  readonly base: string;
  readonly gate: string;
  readonly marker: readonly [number, number];
}

/**
 * The backend of `PostgresSemaphore`: a key of limit N is N slot advisory locks and a gate (see
 * `semaphore-statements.ts`), on the locker's one session (see `Session`), with releases heard
 * through `LISTEN`/`NOTIFY` on waiter markers, as the PostgreSQL locks'.
 *
 * - **Leases** live as long as the session: an extension is one `SELECT` per batch confirming it;
 *   a session that ended loses every lease on it (a SIGKILLed holder's permits are back at once).
 * - **Order.** Across sessions, the gate: the first waiter of a key holds it while it waits, and
 *   no other session takes a slot meanwhile. Within this locker, waiters of a key are served in
 *   arrival order: only the first of them tries, and a caller that does not queue (`tryAcquire`)
 *   does not try while any is queued. When the first one gets in or leaves, the next one tries
 *   (see `SlotSemaphoreBackend`, which both SQL semaphores share).
 * - This locker's attempts on one key run one after another, so that the slots one of them takes
 *   are known (and skipped) by the next.
 */
export function postgresSemaphoreBackend(
  pool: PostgresPool,
  options: ResolvedPostgresLockerOptions,
  limit: number,
): contract.BackendFactory {
  return (context) => new PostgresSemaphoreBackend(pool, options, limit, context);
}

class PostgresSemaphoreBackend extends SlotSemaphoreBackend<Session, KeyState, ResolvedPostgresLockerOptions> {
  readonly watcher: MarkerWatcher;
  protected readonly slot: SessionSlot<Session>;
  readonly #pool: PostgresPool;
  /** The locker's one session, its watcher and its fencing sequence (see `LockerSession`). */
  readonly #session: LockerSession;

  constructor(
    pool: PostgresPool,
    options: ResolvedPostgresLockerOptions,
    limit: number,
    context: contract.BackendContext,
  ) {
    super(options, limit, context.events, POSTGRES_LOCK_LIMITS);
    this.#pool = pool;
    this.#session = new LockerSession(pool, options, context, {
      notified: (key) => context.events.released(key),
      // Its slots and gates died with it; the waiters here try again on the next session.
      forget: (session, current) => this.books.forget(session, current),
    });
    this.slot = this.#session.slot;
    this.watcher = this.#session.watcher;
  }

  protected keyOf(resource: string): KeyState {
    return {
      resource,
      base: slotBase(resource, this.limit).toString(),
      gate: gateId(resource).toString(),
      marker: markerOf(lockId(resource)),
      waiters: new Set(),
      gateHolder: undefined,
      turn: undefined,
    };
  }

  /** Waiters queue here and at the gate; a release grants nothing (the waiters try). */
  grants(): boolean {
    return false;
  }

  /** Reads the slots' holders and the waiters' markers from `pg_locks` (see `inspect.ts`). */
  inspect(resource: string): Promise<contract.StoredView> {
    const { connectTimeout, operationTimeout } = this.options;
    const settings = { pool: this.#pool, connectTimeout, operationTimeout, exclusiveWeight: this.limit };
    return inspectSlots(settings, resource, BigInt(this.books.key(resource).base), this.limit);
  }

  protected async take(
    state: KeyState,
    request: contract.AttemptRequest,
    gate: GateMode,
  ): Promise<contract.AttemptOutcome> {
    const { resource, duration, queueing, fencing, weight } = request;
    const { waiterId, joinOnMiss: join } = queueing;
    const books = this.books;
    const session = this.slot.current ?? (await this.slot.connect(resource));
    const sequence = this.#session.sequence;
    if (fencing) await sequence.ensure(session, resource);
    const held = [...books.slotsHere(resource)];
    const [high, low] = state.marker;
    const key = resource.slice(this.options.prefix.length);
    const sentAt = performance.now();
    const [row] = await sequence.run<TakeRow>(session, resource, TAKE_PERMITS, [
      state.base,
      this.limit,
      weight,
      Math.floor(Math.random() * this.limit),
      held,
      state.gate,
      gate,
      fencing,
      fencing ? this.options.fencingSequence : null,
      high,
      low,
      this.#session.channel,
      key,
      session.token,
    ]);
    if (this.slot.current === session) books.setGate(state, row?.head === true ? waiterId : undefined);
    if (row?.ok !== true || row.taken === null) return books.missed(state, join, waiterId, weight, sentAt);
    books.admitted(state, waiterId);
    if (session.ended) return { kind: "expired-on-arrival" };
    const handle = this.lease(resource, sentAt, duration);
    books.hold(handle.token, { session, resource, slots: row.taken });
    session.holds.set(handle.token, weight < this.limit);
    return row.token === null
      ? { kind: "acquired", handle }
      : { kind: "acquired", handle, fencingToken: BigInt(row.token) };
  }

  protected freeSlots(session: Session, held: HeldSlots<Session>): Promise<boolean> {
    const state = this.books.key(held.resource);
    return session
      .query<{ released: boolean | null }>(RELEASE_PERMITS, [
        state.base,
        held.slots,
        ...state.marker,
        this.#session.channel,
        held.resource.slice(this.options.prefix.length),
        session.token,
      ])
      .then(([row]) => row?.released === true);
  }

  /** Opens the gate, waking the waiters of other sessions. */
  protected async openGateOn(session: Session, state: KeyState): Promise<void> {
    const key = state.resource.slice(this.options.prefix.length);
    await session
      .query(OPEN_GATE, [state.gate, ...state.marker, this.#session.channel, key, session.token])
      .catch(() => undefined);
  }

  issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    return this.#session.issueFencingToken(handle);
  }
}
