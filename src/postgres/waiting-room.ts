import { checkOutWithin } from "../internal/pool-checkout.js";
import { lockIdText } from "./keys.js";
import type { PostgresPool, PostgresPoolClient } from "./types.js";

/** What a {@link WaitingRooms} needs of its backend. */
export interface WaitingRoomsHost {
  readonly pool: PostgresPool;
  /** How long to wait for a pool connection, in ms. */
  readonly connectTimeout: number;
  /** The most rooms this locker waits in at once (each takes a pool connection). */
  readonly limit: number;
  /** The locker's waiters for `resource` are at the head of its room: they try now. */
  wake(resource: string): void;
  /**
   * Cancels the statement of backend `pid` (`pg_cancel_backend`), on the locker's session: a
   * cancel needs no connection of its own, which an exhausted pool might not give.
   */
  cancel(pid: number): Promise<unknown>;
  /** True once the locker closes: no room is entered any more. */
  closing(): boolean;
  /** True while this locker holds `resource` (or tries it): its own release wakes its waiters. */
  heldHere(resource: string): boolean;
}

/** The SQLSTATE of a statement cancelled by `pg_cancel_backend` (`query_canceled`). */
const QUERY_CANCELED = "57014";

/** Where a locker's place in one key's room stands. */
type PlaceState = "connecting" | "queued" | "head" | "leaving";

/** A locker's place in one key's waiting room: a pool connection blocked on the room's lock. */
interface Place {
  readonly resource: string;
  readonly room: string;
  state: PlaceState;
  client: PostgresPoolClient | undefined;
  /** The connection's backend process id, for `pg_cancel_backend`. */
  pid: number;
  /** Ends the head's turn (the key was taken here, or nobody here waits any more). */
  endTurn: (() => void) | undefined;
  /** True once a cancel was sent: the connection is destroyed at the end, never pooled. */
  cancelled: boolean;
  /** True when it ended for want of a connection, or with a failed one: not taken again. */
  failed: boolean;
  /** True once its connection went back to the pool (or was destroyed). */
  released: boolean;
}

/** The room's lock id of `resource`: a lock of its own, apart from the key's lock and marker. */
function roomOf(resource: string): string {
  return lockIdText(`${resource}\u0000room`);
}

/**
 * Waiting rooms: the order in which PostgresLocker lockers waiting for one key try it, kept by
 * PostgreSQL's own lock queue, which grants a blocked `pg_advisory_lock` in arrival order.
 *
 * Every locker hears every release of a key it waits for (`NOTIFY`), and each used to try at
 * once: eight lockers on one key sent eight tries per release, and the fastest won, again and
 * again. Now, while a locker waits for a key, one connection from its pool blocks in
 * `pg_advisory_lock` on the key's *room* (a lock id of its own). The locker whose connection holds
 * the room is the key's head: only it acts on the key's release notifications, and it tries at once
 * when it enters the room (a release may have come while it queued). When it takes the key, it
 * leaves the room — the next locker in line enters — and queues again at the back while callers
 * here still wait. So the lockers take turns, one try per release.
 *
 * The room orders tries; it excludes nobody. The key's own lock is the lock, as before: a locker
 * without a place (more keys waited for than {@link WaitingRoomsHost.limit}, a pool that gave no
 * connection, a place's connection that failed) acts on every notification as before, and every
 * waiter still polls as its safety net. A locker that dies or disconnects leaves the room with its
 * connection (PostgreSQL frees a session's advisory locks). A place nobody here needs any more is
 * cancelled with `pg_cancel_backend`; its connection, once cancelled, is destroyed rather than
 * pooled, so a room's lock never goes back to the pool.
 */
export class WaitingRooms {
  readonly #host: WaitingRoomsHost;
  /** How many watch each resource here (a place is kept while anyone does). */
  readonly #watchers = new Map<string, number>();
  readonly #places = new Map<string, Place>();
  /** Settles when each place's connection is back (see {@link close}). */
  readonly #running = new Set<Promise<void>>();

  constructor(host: WaitingRoomsHost) {
    this.#host = host;
  }

  /**
   * Someone here waits for `resource`: take a place in its room unless there is one, or the key
   * is held here (see {@link heldElsewhere}).
   */
  enter(resource: string): void {
    this.#watchers.set(resource, (this.#watchers.get(resource) ?? 0) + 1);
    if (!this.#host.heldHere(resource)) this.#start(resource);
  }

  /** A try here found `resource` held by another locker: take a place if it is waited for here. */
  heldElsewhere(resource: string): void {
    if (this.#watchers.has(resource)) this.#start(resource);
  }

  /** One fewer waits for `resource`: with nobody left, the place is given up. */
  leave(resource: string): void {
    const count = (this.#watchers.get(resource) ?? 1) - 1;
    if (count > 0) {
      this.#watchers.set(resource, count);
      return;
    }
    this.#watchers.delete(resource);
    const place = this.#places.get(resource);
    if (place !== undefined) this.#giveUp(place);
  }

  /**
   * Whether a release notification of `resource` should wake its waiters here: not while this
   * locker's place waits in the room behind others (the head tries; our turn comes).
   */
  hears(resource: string): boolean {
    const state = this.#places.get(resource)?.state;
    return state !== "queued";
  }

  /** This locker took `resource`: the head's turn ends, and its place queues again if needed. */
  acquired(resource: string): void {
    const place = this.#places.get(resource);
    if (place?.state === "head") place.endTurn?.();
  }

  /** Gives up every place; resolves once every place's connection is back. */
  async close(): Promise<void> {
    for (const place of this.#places.values()) this.#giveUp(place);
    await Promise.all(this.#running);
  }

  #start(resource: string): void {
    const host = this.#host;
    if (this.#places.has(resource) || this.#places.size >= host.limit || host.closing()) return;
    const place: Place = {
      resource,
      room: roomOf(resource),
      state: "connecting",
      client: undefined,
      pid: 0,
      endTurn: undefined,
      cancelled: false,
      failed: false,
      released: false,
    };
    this.#places.set(resource, place);
    const running = this.#run(place).finally(() => {
      this.#running.delete(running);
      if (this.#places.get(resource) === place) this.#places.delete(resource);
      // Given up, then waited for again before it was gone: take a new place. (One that failed is
      // not retaken while it is waited for: those waiters hear every release, as without rooms.)
      if (!place.failed && this.#watchers.has(resource)) this.#start(resource);
    });
    this.#running.add(running);
  }

  /** A place's life: queue in the room, act as head, leave; again while anyone here waits. */
  async #run(place: Place): Promise<void> {
    let client: PostgresPoolClient;
    try {
      client = await checkOutWithin(this.#host.pool.connect(), this.#host.connectTimeout, "PostgreSQL");
    } catch {
      // No connection: this locker waits without a place (it hears every release).
      place.failed = true;
      place.state = "leaving";
      return;
    }
    place.client = client;
    let clean = false;
    try {
      const [row] = (await client.query({ text: "SELECT pg_backend_pid() AS pid" })).rows as Array<{ pid: number }>;
      place.pid = row?.pid ?? 0;
      while (place.state !== "leaving" && !this.#host.closing()) {
        place.state = "queued";
        await client.query({ text: "SELECT pg_advisory_lock($1::bigint)", values: [place.room] });
        if ((place.state as PlaceState) === "leaving") break;
        place.state = "head";
        const turn = new Promise<void>((resolve) => {
          place.endTurn = resolve;
        });
        this.#host.wake(place.resource);
        await turn;
        place.endTurn = undefined;
        await client.query({ text: "SELECT pg_advisory_unlock($1::bigint)", values: [place.room] });
      }
      // Left while holding the room, or between turns: let it go before the connection goes back.
      await client.query({ text: "SELECT pg_advisory_unlock_all()" });
      clean = true;
    } catch (error) {
      // Cancelled while queued (the usual way out), or the connection failed: destroyed below.
      if ((error as { code?: unknown }).code !== QUERY_CANCELED || !place.cancelled) place.failed = true;
    } finally {
      place.state = "leaving";
      // A cancel may still be on its way to this backend: such a connection never goes back.
      if (!place.released) {
        place.released = true;
        client.release(!clean || place.cancelled);
      }
    }
  }

  /** Nobody here waits for the place's key any more: leave the room. */
  #giveUp(place: Place): void {
    const was = place.state;
    place.state = "leaving";
    if (was === "head") place.endTurn?.();
    else if (was === "queued" && !place.cancelled) {
      place.cancelled = true;
      // No cancel (no session to send it on): the connection is destroyed, which ends the wait.
      this.#host.cancel(place.pid).catch(() => {
        if (place.released || place.client === undefined) return;
        place.released = true;
        place.client.release(true);
      });
    }
  }
}
