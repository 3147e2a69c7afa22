import { performance } from "node:perf_hooks";
import type {
  AttemptOutcome,
  AttemptRequest,
  Backend,
  BackendEvents,
  BackendFactory,
  Capabilities,
  ExtendOutcome,
  Fencing,
  Naming,
  StoredView,
  WaitQueue,
} from "../core/backend.js";
import { LockHandle } from "../core/backend.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { confirmSession } from "../sql/session-heartbeat.js";
import { SessionSlot } from "../sql/session-slot.js";
import { inspectSlots } from "./inspect.js";
import { channelOf, lockId, markerOf } from "./keys.js";
import { MarkerWatcher } from "./marker-watcher.js";
import type { ResolvedPostgresLockerOptions } from "./options.js";
import {
  GATE,
  gateId,
  OPEN_GATE,
  RELEASE_PERMITS,
  slotBase,
  TAKE_PERMITS,
  type TakeRow,
} from "./semaphore-statements.js";
import { FencingSequence, openSession, type Session, unavailable } from "./session.js";
import type { PostgresPool } from "./types.js";

/** Permits held here: the session's slots of the key. */
interface Held {
  readonly session: Session;
  readonly resource: string;
  readonly slots: readonly number[];
}

/** What this locker keeps of a key: its slots' ids, its waiters here in arrival order, the gate. */
interface KeyState {
  readonly resource: string;
  readonly base: string;
  readonly gate: string;
  readonly marker: readonly [number, number];
  /** Waiters of this locker queued for the key (by their id in the core), first in line first. */
  readonly waiters: Set<string>;
  /** The waiter here that holds the key's gate on the current session, if any. */
  gateHolder: string | undefined;
  /** The latest attempt here (this locker's attempts on a key run one after another). */
  turn: Promise<unknown> | undefined;
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
 *   does not try while any is queued. When the first one gets in or leaves, the next one tries.
 * - This locker's attempts on one key run one after another, so that the slots one of them takes
 *   are known (and skipped) by the next.
 */
export function postgresSemaphoreBackend(
  pool: PostgresPool,
  options: ResolvedPostgresLockerOptions,
  limit: number,
): BackendFactory {
  return ({ events, owner }) => new PostgresSemaphoreBackend(pool, options, limit, events, owner);
}

class PostgresSemaphoreBackend implements Backend, Naming, WaitQueue, Fencing {
  readonly can: Capabilities;
  readonly watcher = new MarkerWatcher({
    current: () => this.#slot.current,
    connect: (resource) => this.#slot.connect(resource),
    closing: () => this.#slot.closing,
    close: () => this.#slot.close(async () => undefined),
  });
  readonly #pool: PostgresPool;
  readonly #options: ResolvedPostgresLockerOptions;
  readonly #limit: number;
  readonly #events: BackendEvents;
  readonly #owner: string;
  readonly #channel: string;
  readonly #slot: SessionSlot<Session>;
  readonly #sequence: FencingSequence;
  /** Permits held here, by token. */
  readonly #held = new Map<string, Held>();
  /** Per resource, the slots the current session holds (skipped by its attempts). */
  readonly #slots = new Map<string, Set<number>>();
  readonly #keys = new Map<string, KeyState>();

  constructor(
    pool: PostgresPool,
    options: ResolvedPostgresLockerOptions,
    limit: number,
    events: BackendEvents,
    owner: string,
  ) {
    this.#pool = pool;
    this.#options = options;
    this.#limit = limit;
    this.#events = events;
    this.#owner = owner;
    this.#channel = channelOf(options.prefix);
    this.#sequence = new FencingSequence(options.fencingSequence);
    this.#slot = new SessionSlot<Session>({
      expiry: options.expiry,
      prefixLength: options.prefix.length,
      events,
      unavailable,
      open: (resource) => this.#open(resource),
      // Ended by the server for idleness (57P05), unconfirmed or found shared: expired; else taken.
      reasonOf: (how, cause) =>
        how === "dropped" && (cause as { code?: unknown } | undefined)?.code !== "57P05" ? "taken" : "expired",
      opened: () => this.watcher.sessionOpened(),
      forget: (session, current) => {
        if (current) this.watcher.sessionEnded();
        // Its slots and gates died with it; the waiters here try again on the next session.
        for (const [token, held] of this.#held) if (held.session === session) this.#held.delete(token);
        if (current) {
          this.#slots.clear();
          for (const state of this.#keys.values()) state.gateHolder = undefined;
        }
      },
    });
    this.can = {
      naming: this,
      permits: true,
      heldUntilReleased: true,
      queue: this,
      fencing: this,
      handOff: { unsupported: "a PostgreSQL advisory lock belongs to the session (connection) that took it" },
      listing: {
        unsupported: "PostgreSQL advisory locks are named by a hash of the key, so the key cannot be read back",
      },
    };
  }

  resourceOf(key: string): string {
    return this.#options.prefix + key;
  }

  /** Waiters queue here and at the gate; a release grants nothing (the waiters try). */
  grants(): boolean {
    return false;
  }

  /** Reads the slots' holders and the waiters' markers from `pg_locks` (see `inspect.ts`). */
  inspect(resource: string): Promise<StoredView> {
    const { connectTimeout, operationTimeout } = this.#options;
    const settings = { pool: this.#pool, connectTimeout, operationTimeout, exclusiveWeight: this.#limit };
    const state = this.#state(resource);
    return inspectSlots(settings, resource, BigInt(state.base), this.#limit);
  }

  acquire(request: AttemptRequest): Promise<AttemptOutcome> {
    const state = this.#state(request.resource);
    return this.#inTurn(state, () => this.#attempt(state, request));
  }

  async #attempt(state: KeyState, request: AttemptRequest): Promise<AttemptOutcome> {
    this.#slot.checkRefusal();
    const { resource, duration, queueing, fencing, weight } = request;
    const { waiterId, joinOnMiss: join } = queueing;
    const [first] = state.waiters;
    // In arrival order here: the first waiter tries; a caller that does not queue, only while none does.
    const mayTry = first === undefined || (join && first === waiterId);
    const gate =
      state.gateHolder === waiterId
        ? GATE.held
        : state.gateHolder !== undefined
          ? undefined
          : join
            ? GATE.take
            : GATE.check;
    if (!mayTry || gate === undefined) return this.#missed(state, join, waiterId, weight, performance.now());
    const session = this.#slot.current ?? (await this.#slot.connect(resource));
    if (fencing) await this.#sequence.ensure(session, resource);
    const held = [...(this.#slots.get(resource) ?? [])];
    const [high, low] = state.marker;
    const key = resource.slice(this.#options.prefix.length);
    const sentAt = performance.now();
    const [row] = await this.#sequence.run<TakeRow>(session, resource, TAKE_PERMITS, [
      state.base,
      this.#limit,
      weight,
      Math.floor(Math.random() * this.#limit),
      held,
      state.gate,
      gate,
      fencing,
      fencing ? this.#options.fencingSequence : null,
      high,
      low,
      this.#channel,
      key,
      session.token,
    ]);
    if (this.#slot.current === session) state.gateHolder = row?.head === true ? waiterId : undefined;
    if (row?.ok !== true || row.taken === null) return this.#missed(state, join, waiterId, weight, sentAt);
    if (state.waiters.delete(waiterId) && state.waiters.size > 0) this.#wakeHere(key);
    if (session.ended) return { kind: "expired-on-arrival" };
    const handle = new LockHandle(newToken(), resource, sentAt, sentAt + Math.min(duration, this.#options.expiry));
    const slots = this.#slots.get(resource) ?? new Set<number>();
    for (const slot of row.taken) slots.add(slot);
    this.#slots.set(resource, slots);
    this.#held.set(handle.token, { session, resource, slots: row.taken });
    session.holds.set(handle.token, weight < this.#limit);
    return row.token === null
      ? { kind: "acquired", handle }
      : { kind: "acquired", handle, fencingToken: BigInt(row.token) };
  }

  /** A miss; a waiter joins this locker's queue of the key, and is told it queued. */
  #missed(state: KeyState, join: boolean, waiterId: string, weight: number, sentAt: number): AttemptOutcome {
    if (!join) return { kind: "held" };
    state.waiters.add(waiterId);
    return { kind: "held", registration: { token: "", weight, sentAt, serverMs: 0 } };
  }

  /** The next waiter here tries (once the attempt that let it go has answered). */
  #wakeHere(key: string): void {
    queueMicrotask(() => this.#events.released(key));
  }

  /** One `SELECT` confirms the session, and so every lease of the batch on it. */
  extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    return confirmSession(this.#slot.current, handles, duration, this.#slot.heartbeat);
  }

  async release(handle: LockHandle): Promise<ReleaseOutcome> {
    const held = this.#held.get(handle.token);
    const session = this.#slot.current;
    if (held === undefined || session === undefined || held.session !== session) return "expired";
    this.#held.delete(handle.token);
    session.holds.delete(handle.token);
    const slots = this.#slots.get(held.resource);
    for (const slot of held.slots) slots?.delete(slot);
    if (slots?.size === 0) this.#slots.delete(held.resource);
    if (this.#slot.endIfLastExpired(session, handle.validUntil)) return "expired";
    const state = this.#state(held.resource);
    try {
      const [row] = await session.query<{ released: boolean | null }>(RELEASE_PERMITS, [
        state.base,
        held.slots,
        ...state.marker,
        this.#channel,
        held.resource.slice(this.#options.prefix.length),
        session.token,
      ]);
      return row?.released === true ? "released" : "expired";
    } catch {
      return session.ended ? "expired" : "unknown";
    } finally {
      await this.#slot.afterRelease(session);
    }
  }

  /**
   * A waiter gave up: it leaves this locker's queue of the key, and gives the gate up if it held
   * it (waking the waiters of other sessions); the next waiter here tries.
   */
  leaveQueue(resource: string, waiterId: string): Promise<void> {
    const state = this.#state(resource);
    return this.#inTurn(state, async () => {
      const wasFirst = state.waiters.values().next().value === waiterId;
      if (!state.waiters.delete(waiterId)) return;
      const key = resource.slice(this.#options.prefix.length);
      if (wasFirst && state.waiters.size > 0) this.#wakeHere(key);
      if (state.gateHolder !== waiterId) return;
      state.gateHolder = undefined;
      const session = this.#slot.current;
      if (session === undefined) return;
      await session
        .query(OPEN_GATE, [state.gate, ...state.marker, this.#channel, key, session.token])
        .catch(() => undefined);
    });
  }

  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    const session = this.#slot.current;
    if (session === undefined || !session.holds.has(handle.token)) return undefined;
    await this.#sequence.ensure(session, handle.resource);
    const [row] = await this.#sequence.run<{ token: string }>(
      session,
      handle.resource,
      "SELECT nextval($1::regclass)::text AS token",
      [this.#options.fencingSequence],
    );
    return row === undefined ? undefined : BigInt(row.token);
  }

  /** What this locker keeps of `resource` (made on first use; forgotten once idle). */
  #state(resource: string): KeyState {
    let state = this.#keys.get(resource);
    if (state === undefined) {
      state = {
        resource,
        base: slotBase(resource, this.#limit).toString(),
        gate: gateId(resource).toString(),
        marker: markerOf(lockId(resource)),
        waiters: new Set(),
        gateHolder: undefined,
        turn: undefined,
      };
      this.#keys.set(resource, state);
    }
    return state;
  }

  /**
   * Runs `step` once the previous step on the key here settled; the key's state is dropped once
   * nothing runs, waits or holds the gate for it.
   */
  #inTurn<T>(state: KeyState, step: () => Promise<T>): Promise<T> {
    const previous = state.turn;
    const run = previous === undefined ? step() : previous.then(step);
    const settled = run.catch(() => undefined);
    state.turn = settled;
    void settled.then(() => {
      if (state.turn !== settled) return;
      state.turn = undefined;
      if (state.waiters.size === 0 && state.gateHolder === undefined) this.#keys.delete(state.resource);
    });
    return run;
  }

  /** A new session, checked out of the pool and set up (see `SessionSlot`). */
  #open(resource: string): Promise<Session> {
    const { connectTimeout, operationTimeout, expiry } = this.#options;
    return openSession(
      this.#pool,
      { connectTimeout, operationTimeout, expiry, channel: this.#channel, owner: this.#owner },
      {
        notified: (key) => this.#events.released(key),
        ended: (ended, how, cause) => this.#slot.ended(ended, how, cause),
      },
      resource,
    );
  }
}
