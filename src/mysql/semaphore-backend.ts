import { performance } from "node:perf_hooks";
import type * as contract from "../backend.js";
import { MYSQL_LOCK_LIMITS } from "../sql/session-capabilities.js";
import type { SessionSlot } from "../sql/session-slot.js";
import { GATE, type GateMode, type HeldSlots, type SlotKey } from "../sql/slot-books.js";
import { SlotSemaphoreBackend } from "../sql/slot-semaphore-backend.js";
import { FencingTable } from "./fencing-table.js";
import { LockConnection } from "./lock-connection.js";
import type { ResolvedMySqlLockerOptions } from "./options.js";
import type { ProbeWatcher } from "./probe-watcher.js";
import {
  gateName,
  openGate,
  releasePermits,
  slotBase,
  slotHolders,
  slotName,
  type TakeRow,
  takePermits,
} from "./semaphore-statements.js";
import { isStatementError, type Session, unavailable } from "./session.js";
import type { MySqlPool } from "./types.js";

/** What this locker keeps of a key: its names, its waiters here in arrival order, the gate. */
interface KeyState extends SlotKey {
  readonly base: string;
  readonly gate: string;
  /** A slot the latest attempt here found held: what the probe waits for while the gate is ours. */
  busySlot: number;
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
 *   (only the first waiter here tries; `tryAcquire` does not try while any waits; see
 *   `SlotSemaphoreBackend`).
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
): contract.BackendFactory {
  return (context) => new MySqlSemaphoreBackend(pool, options, limit, context);
}

class MySqlSemaphoreBackend extends SlotSemaphoreBackend<Session, KeyState, ResolvedMySqlLockerOptions> {
  readonly watcher: ProbeWatcher;
  protected readonly slot: SessionSlot<Session>;
  readonly #fencing: FencingTable;

  constructor(pool: MySqlPool, options: ResolvedMySqlLockerOptions, limit: number, context: contract.BackendContext) {
    super(options, limit, context.events, MYSQL_LOCK_LIMITS);
    this.#fencing = new FencingTable(options.fencingTable);
    const connection = new LockConnection(pool, options, context, {
      heldHere: () => false,
      probeName: (resource) => this.#probeName(resource),
      // Its slots and gates died with it; the waiters here try again on the next connection.
      forget: (session, current) => this.books.forget(session, current),
    });
    this.slot = connection.slot;
    this.watcher = connection.watcher;
  }

  protected keyOf(resource: string): KeyState {
    return {
      resource,
      base: slotBase(resource),
      gate: gateName(resource),
      waiters: new Set(),
      gateHolder: undefined,
      busySlot: 0,
      turn: undefined,
    };
  }

  /** The key's probe then waits for another name. */
  protected override gateMoved(key: KeyState): void {
    this.watcher.renamed(key.resource);
  }

  protected async take(
    key: KeyState,
    request: contract.AttemptRequest,
    gate: GateMode,
  ): Promise<contract.AttemptOutcome> {
    const { resource, duration, queueing, fencing, weight } = request;
    const { waiterId, joinOnMiss: join } = queueing;
    const books = this.books;
    // A probe of ours cancelled a moment ago may still hold a slot or the gate for a round trip:
    // a try that does not wait must not miss for it (a waiter hears the probe's release).
    const stopping = join ? undefined : this.watcher.stopping(resource);
    if (stopping !== undefined) await stopping;
    const session = await this.slot.connect(resource);
    if (fencing) await this.#fencing.ensure(session, resource);
    const held = books.slotsHere(resource);
    const [sql, values] = takePermits({
      token: session.token,
      gate: key.gate,
      gateMode: gate,
      base: key.base,
      limit: this.limit,
      weight,
      start: Math.floor(Math.random() * this.limit),
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
    if (this.slot.current === session) books.setGate(key, head ? waiterId : undefined);
    this.#settle(session, resource);
    if (!ok) {
      const busy = numbers(row?.busy);
      key.busySlot = busy.find((slot) => !held.has(slot)) ?? busy[0] ?? key.busySlot;
      this.watcher.heldElsewhere(resource);
      return books.missed(key, join, waiterId, weight, sentAt);
    }
    this.watcher.acquiredHere(resource);
    books.admitted(key, waiterId);
    if (session.ended) return { kind: "expired-on-arrival" };
    const handle = this.lease(resource, sentAt, duration);
    books.hold(handle.token, { session, resource, slots: numbers(row?.taken) });
    this.#settle(session, resource);
    session.holds.set(handle.token, resource);
    if (!fencing) return { kind: "acquired", handle };
    return this.#fencing.fenced(session, handle, key.base, this);
  }

  /**
   * What the key's probe waits for: a slot held elsewhere while this locker holds the gate (its
   * first waiter needs permits), else the gate (another connection's first waiter holds it).
   */
  #probeName(resource: string): string {
    const key = this.books.key(resource);
    return key.gateHolder === undefined ? key.gate : slotName(key.base, key.busySlot);
  }

  /**
   * Keeps `resource` on `session`'s books while a slot or the gate of it is held there (a
   * connection with a lock on it is never given back to the pool; see `Session.retire`).
   */
  #settle(session: Session, resource: string): void {
    if (this.books.busy(resource)) session.resources.add(resource);
    else session.resources.delete(resource);
  }

  /** Frees the slots on the connection; the key stays on its books while the gate is held here. */
  protected freeSlots(session: Session, held: HeldSlots<Session>): Promise<boolean> {
    const [sql, values] = releasePermits(session.token, this.books.key(held.resource).base, held.slots);
    const freed = session
      .query<Array<{ released: unknown }>>(sql, values)
      .then(([row]) => Number(row?.released) === held.slots.length);
    // Settled before the session may retire (it keeps a connection with a lock on it).
    return freed.finally(() => this.#settle(session, held.resource));
  }

  protected async openGateOn(session: Session, key: KeyState): Promise<void> {
    const [sql, values] = openGate(session.token, key.gate);
    await session.query(sql, values).catch(() => undefined);
    this.#settle(session, key.resource);
  }

  issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    return this.#fencing.issue(this.slot.current, handle, () => this.books.key(handle.resource).base);
  }

  /**
   * Who holds the key's slots (one holder per connection, its weight the slots it holds, its owner
   * from the owner table) and how many connections wait in `GET_LOCK` on its gate, its slots or
   * their waiting rooms (this process's probes and anyone's, as far as the processlist shows them).
   */
  async inspect(resource: string): Promise<contract.StoredView> {
    const session = await this.slot.connect(resource);
    const { base, gate } = this.books.key(resource);
    type HolderRow = { holder: unknown; weight: unknown; owner?: unknown };
    let rows: HolderRow[];
    let waiting: Array<{ waiting: unknown }>;
    try {
      try {
        const [sql, values] = slotHolders(base, this.limit, this.options.ownerTable);
        rows = await session.query<HolderRow[]>(sql, values);
      } catch (error) {
        if (!isStatementError(error)) throw error;
        // No owner table (or no right to read it): the holders' owners are unknown.
        const [sql, values] = slotHolders(base, this.limit);
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
}

/** The numbers of a comma-separated list (`GROUP_CONCAT`'s answer); none for null. */
function numbers(list: string | null | undefined): number[] {
  return list === null || list === undefined || list === "" ? [] : list.split(",").map(Number);
}
