import { performance } from "node:perf_hooks";
import type {
  AttemptOutcome,
  AttemptRequest,
  Backend,
  BackendContext,
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
import { UnsupportedError } from "../errors.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { confirmSession } from "../sql/session-heartbeat.js";
import { SessionSlot } from "../sql/session-slot.js";
import { FencingTable } from "./fencing-table.js";
import type { ResolvedMySqlLockerOptions } from "./options.js";
import { ProbeWatcher } from "./probe-watcher.js";
import {
  GATE,
  gateName,
  openGate,
  releasePermits,
  slotBase,
  slotHolders,
  slotName,
  type TakeRow,
  takePermits,
} from "./semaphore-statements.js";
import { checkOut, isStatementError, Session, unavailable } from "./session.js";
import type { MySqlPool } from "./types.js";

/** Permits held here: the session's slots of the key. */
interface Held {
  readonly session: Session;
  readonly resource: string;
  readonly slots: readonly number[];
}

/** What this locker keeps of a key: its names, its waiters here in arrival order, the gate. */
interface KeyState {
  readonly resource: string;
  readonly base: string;
  readonly gate: string;
  /** Waiters of this locker queued for the key (by their id in the core), first in line first. */
  readonly waiters: Set<string>;
  /** The waiter here that holds the key's gate on the current session, if any. */
  gateHolder: string | undefined;
  /** A slot the latest attempt here found held: what the probe waits for while the gate is ours. */
  busySlot: number;
  /** The latest attempt here (this locker's attempts on a key run one after another). */
  turn: Promise<unknown> | undefined;
}

/**
 * The backend of `MySqlSemaphore`: a key of limit N is N slot `GET_LOCK` locks and a gate (see
 * `semaphore-statements.ts`) on the locker's one lock connection (see `Session`).
 *
 * - **Leases** live as long as the connection: an extension is one `SELECT` per batch confirming
 *   it; a connection that ended loses every lease on it (a SIGKILLed holder's permits are back at
 *   once).
 * - **Order** as PostgreSQL's semaphore: across connections the gate (the first waiter holds it
 *   while it waits; no other connection takes a slot meanwhile); within this locker, arrival order
 *   (only the first waiter here tries; `tryAcquire` does not try while any waits).
 * - **Wake-ups** (MySQL has no NOTIFY): one probe connection per key (see `ProbeWatcher`) blocks in
 *   `GET_LOCK` on the gate while another connection holds it, and on a slot the last attempt found
 *   held while the gate is this locker's: the server grants it the moment its holder lets go, and
 *   the probe gives it straight back and wakes the waiters here. Slots and the gate released by
 *   this locker wake its waiters directly.
 */
export function mySqlSemaphoreBackend(
  pool: MySqlPool,
  options: ResolvedMySqlLockerOptions,
  limit: number,
): BackendFactory {
  return (context) => new MySqlSemaphoreBackend(pool, options, limit, context);
}

class MySqlSemaphoreBackend implements Backend, Naming, WaitQueue, Fencing {
  readonly can: Capabilities;
  readonly watcher: ProbeWatcher;
  readonly #pool: MySqlPool;
  readonly #options: ResolvedMySqlLockerOptions;
  readonly #limit: number;
  readonly #events: BackendEvents;
  readonly #owner: string;
  readonly #fencing: FencingTable;
  readonly #slot: SessionSlot<Session>;
  /** Permits held here, by token. */
  readonly #held = new Map<string, Held>();
  /** Per resource, the slots the current session holds (skipped by its attempts). */
  readonly #slots = new Map<string, Set<number>>();
  readonly #keys = new Map<string, KeyState>();
  /** Whether the owner table was made (or found) by this locker. */
  #ownerTable: Promise<boolean> | undefined;

  constructor(pool: MySqlPool, options: ResolvedMySqlLockerOptions, limit: number, context: BackendContext) {
    this.#pool = pool;
    this.#options = options;
    this.#limit = limit;
    this.#events = context.events;
    this.#owner = context.owner;
    this.#fencing = new FencingTable(options.fencingTable);
    this.#slot = new SessionSlot<Session>({
      expiry: options.expiry,
      prefixLength: options.prefix.length,
      events: context.events,
      unavailable,
      open: (resource) => this.#open(resource),
      // Killed (ER_CONNECTION_KILLED), idle past wait_timeout, unconfirmed or found shared:
      // expired; else it dropped: taken.
      reasonOf: (how, cause) =>
        how === "unconfirmed" || how === "moved" || (cause as { errno?: unknown } | undefined)?.errno === 4031
          ? "expired"
          : "taken",
      forget: (session, current) => {
        // Its slots and gates died with it; the waiters here try again on the next connection.
        for (const [token, held] of this.#held) if (held.session === session) this.#held.delete(token);
        if (!current) return;
        this.#slots.clear();
        for (const state of this.#keys.values()) this.#setGate(state, undefined);
      },
    });
    this.watcher = new ProbeWatcher({
      pool,
      connectTimeout: options.connectTimeout,
      limit: options.watchConnections,
      heldHere: () => false,
      released: (resource) => this.#events.released(resource.slice(options.prefix.length)),
      cancel: (id) => this.#cancel(id),
      closing: () => this.#slot.closing,
      close: () => this.#slot.close(() => this.watcher.stop()),
      probeName: (resource) => this.#probeName(resource),
    });
    this.can = {
      naming: this,
      permits: true,
      heldUntilReleased: true,
      queue: this,
      fencing: this,
      handOff: { unsupported: "a MySQL GET_LOCK lock belongs to the connection that took it" },
      listing: {
        unsupported: "MySQL user-level locks (GET_LOCK) are named by a hash of the key, so the key cannot be read back",
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
    const session = await this.#slot.connect(resource);
    if (fencing) await this.#fencing.ensure(session, resource);
    const held = this.#slots.get(resource) ?? new Set<number>();
    const [sql, values] = takePermits({
      token: session.token,
      gate: state.gate,
      gateMode: gate,
      base: state.base,
      limit: this.#limit,
      weight,
      start: Math.floor(Math.random() * this.#limit),
      held: [...held].join(","),
    });
    const sentAt = performance.now();
    let row: TakeRow | undefined;
    // Tried here: a connection with a slot or the gate on it never goes back to the pool.
    session.resources.add(resource);
    try {
      [row] = await session.query<TakeRow[]>(sql, values);
    } catch (error) {
      // What the statement left is unknown: the connection stays marked (it is destroyed, not
      // given back, unless a later release or attempt on the key clears it).
      throw unavailable(resource, error);
    }
    const ok = Number(row?.ok) === 1;
    const head = !ok && Number(row?.gate) === 1 && gate !== GATE.check;
    if (this.#slot.current === session) this.#setGate(state, head ? waiterId : undefined);
    this.#settle(session, resource);
    if (!ok) {
      const busy = numbers(row?.busy);
      state.busySlot = busy.find((slot) => !held.has(slot)) ?? busy[0] ?? state.busySlot;
      this.watcher.heldElsewhere(resource);
      return this.#missed(state, join, waiterId, weight, sentAt);
    }
    this.watcher.acquiredHere(resource);
    if (state.waiters.delete(waiterId) && state.waiters.size > 0) this.#wakeHere(resource);
    if (session.ended) return { kind: "expired-on-arrival" };
    const taken = numbers(row?.taken);
    const handle = new LockHandle(newToken(), resource, sentAt, sentAt + Math.min(duration, this.#options.expiry));
    for (const slot of taken) held.add(slot);
    this.#slots.set(resource, held);
    this.#settle(session, resource);
    this.#held.set(handle.token, { session, resource, slots: taken });
    session.holds.set(handle.token, resource);
    if (!fencing) return { kind: "acquired", handle };
    try {
      return { kind: "acquired", handle, fencingToken: await this.#fencing.next(session, resource, state.base) };
    } catch (error) {
      await this.release(handle);
      throw error;
    }
  }

  /** A miss; a waiter joins this locker's queue of the key, and is told it queued. */
  #missed(state: KeyState, join: boolean, waiterId: string, weight: number, sentAt: number): AttemptOutcome {
    if (!join) return { kind: "held" };
    state.waiters.add(waiterId);
    return { kind: "held", registration: { token: "", weight, sentAt, serverMs: 0 } };
  }

  /** The next waiter here tries (once the attempt that let it go has answered). */
  #wakeHere(resource: string): void {
    queueMicrotask(() => this.#events.released(resource.slice(this.#options.prefix.length)));
  }

  /** Records who holds `state`'s gate here; the key's probe then waits for another name. */
  #setGate(state: KeyState, holder: string | undefined): void {
    if (state.gateHolder === holder) return;
    const renamed = (state.gateHolder === undefined) !== (holder === undefined);
    state.gateHolder = holder;
    if (renamed) this.watcher.renamed(state.resource);
  }

  /**
   * What the key's probe waits for: a slot held elsewhere while this locker holds the gate (its
   * first waiter needs permits), else the gate (another connection's first waiter holds it).
   */
  #probeName(resource: string): string {
    const state = this.#state(resource);
    return state.gateHolder === undefined ? state.gate : slotName(state.base, state.busySlot);
  }

  /**
   * Keeps `resource` on `session`'s books while a slot or the gate of it is held there (a
   * connection with a lock on it is never given back to the pool; see `Session.retire`).
   */
  #settle(session: Session, resource: string): void {
    const state = this.#keys.get(resource);
    if ((this.#slots.get(resource)?.size ?? 0) > 0 || state?.gateHolder !== undefined) session.resources.add(resource);
    else session.resources.delete(resource);
  }

  /** One `SELECT` confirms the connection, and so every lease of the batch on it. */
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
    try {
      const [sql, values] = releasePermits(session.token, this.#state(held.resource).base, held.slots);
      const [row] = await session.query<Array<{ released: unknown }>>(sql, values);
      return Number(row?.released) === held.slots.length ? "released" : "expired";
    } catch {
      return session.ended ? "expired" : "unknown";
    } finally {
      this.#settle(session, held.resource);
      await this.#slot.afterRelease(session);
    }
  }

  /**
   * A waiter gave up: it leaves this locker's queue of the key, and gives the gate up if it held
   * it; the next waiter here tries.
   */
  leaveQueue(resource: string, waiterId: string): Promise<void> {
    const state = this.#state(resource);
    return this.#inTurn(state, async () => {
      const wasFirst = state.waiters.values().next().value === waiterId;
      if (!state.waiters.delete(waiterId)) return;
      if (wasFirst && state.waiters.size > 0) this.#wakeHere(resource);
      if (state.gateHolder !== waiterId) return;
      this.#setGate(state, undefined);
      const session = this.#slot.current;
      if (session === undefined) return;
      const [sql, values] = openGate(session.token, state.gate);
      await session.query(sql, values).catch(() => undefined);
      this.#settle(session, resource);
    });
  }

  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    const session = this.#slot.current;
    if (session === undefined || !session.holds.has(handle.token)) return undefined;
    await this.#fencing.ensure(session, handle.resource);
    return this.#fencing.next(session, handle.resource, this.#state(handle.resource).base);
  }

  /**
   * Who holds the key's slots (one holder per connection, its weight the slots it holds, its owner
   * from the owner table) and how many connections wait in `GET_LOCK` on its gate, its slots or
   * their waiting rooms (this process's probes and anyone's, as far as the processlist shows them).
   */
  async inspect(resource: string): Promise<StoredView> {
    const session = await this.#slot.connect(resource);
    const { base, gate } = this.#state(resource);
    type HolderRow = { holder: unknown; weight: unknown; owner?: unknown };
    let rows: HolderRow[];
    let waiting: Array<{ waiting: unknown }>;
    try {
      try {
        const [sql, values] = slotHolders(base, this.#limit, this.#options.ownerTable);
        rows = await session.query<HolderRow[]>(sql, values);
      } catch (error) {
        if (!isStatementError(error)) throw error;
        // No owner table (or no right to read it): the holders' owners are unknown.
        const [sql, values] = slotHolders(base, this.#limit);
        rows = await session.query<HolderRow[]>(sql, values);
      }
      waiting = await session.query<Array<{ waiting: unknown }>>(
        `SELECT COUNT(*) AS waiting FROM information_schema.PROCESSLIST
          WHERE STATE = 'User lock' AND (LOCATE(?, INFO) > 0 OR LOCATE(?, INFO) > 0)`,
        [gate, base],
      );
    } catch (error) {
      throw unavailable(resource, error);
    }
    const holders = rows.map((row) => ({
      owner: typeof row.owner === "string" ? row.owner : "",
      weight: Number(row.weight),
      expiresInMs: Number.POSITIVE_INFINITY,
    }));
    return { holders, waiting: Number(waiting[0]?.waiting ?? 0) };
  }

  /** What this locker keeps of `resource` (made on first use; forgotten once idle). */
  #state(resource: string): KeyState {
    let state = this.#keys.get(resource);
    if (state === undefined) {
      state = {
        resource,
        base: slotBase(resource),
        gate: gateName(resource),
        waiters: new Set(),
        gateHolder: undefined,
        busySlot: 0,
        turn: undefined,
      };
      this.#keys.set(resource, state);
    }
    return state;
  }

  /**
   * Runs `step` once the previous step on the key here settled; the key's state is dropped once
   * nothing runs, waits or holds the gate for it, and nobody here watches it.
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

  /** `KILL QUERY id` on the lock connection; false when there is none or it failed. */
  async #cancel(id: number): Promise<boolean> {
    const session = this.#slot.current;
    if (session === undefined) return false;
    try {
      await session.query("KILL QUERY ?", [id]);
      return true;
    } catch {
      return false;
    }
  }

  /** A new lock connection, checked out of the pool and set up (see `SessionSlot`). */
  async #open(resource: string): Promise<Session> {
    const connection = await checkOut(this.#pool, this.#options.connectTimeout, resource);
    const session = new Session(
      connection,
      this.#options.operationTimeout,
      this.#options.ownerTable,
      (ended, how, cause) => this.#slot.ended(ended, how, cause),
    );
    try {
      // The server ends the connection (freeing its locks) once idle for `expiry`.
      await session.setUp(Math.max(1, Math.ceil(this.#options.expiry / 1000)));
      await this.#writeOwner(session);
    } catch (error) {
      if (error instanceof UnsupportedError) throw error;
      session.end("dropped", error);
      throw unavailable(resource, error);
    }
    return session;
  }

  /** Records this locker's owner for the connection (best effort: an SQL error leaves it unknown). */
  async #writeOwner(session: Session): Promise<void> {
    const table = this.#options.ownerTable;
    this.#ownerTable ??= session
      .query(
        `CREATE TABLE IF NOT EXISTS ${table} (connection_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
          owner VARCHAR(256) CHARACTER SET utf8mb4 NOT NULL) ENGINE=InnoDB`,
      )
      .then(
        () => true,
        (error: unknown) => {
          this.#ownerTable = undefined;
          if (!isStatementError(error)) throw error;
          return false;
        },
      );
    if (!(await this.#ownerTable)) return;
    try {
      await session.query(`REPLACE INTO ${table} (connection_id, owner) VALUES (CONNECTION_ID(), ?)`, [this.#owner]);
      session.ownerWritten = true;
    } catch (error) {
      if (!isStatementError(error)) throw error;
    }
  }
}

/** The numbers of a comma-separated list (`GROUP_CONCAT`'s answer); none for null. */
function numbers(list: string | null | undefined): number[] {
  return list === null || list === undefined || list === "" ? [] : list.split(",").map(Number);
}
