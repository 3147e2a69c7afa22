import { checkOutWithin } from "../internal/pool-checkout.js";
import { newToken } from "../internal/token.js";
import { lockIdText } from "./keys.js";
import { CLAIM_SETTING, sameSession } from "./pooler.js";
import type { PostgresPool, PostgresPoolClient } from "./types.js";

/** What a {@link WaitingRooms} needs of its backend. */
export interface WaitingRoomsHost {
  readonly pool: PostgresPool;
  /** How long to wait for a pool connection, in ms. */
  readonly connectTimeout: number;
  /**
   * How long a place's connection may sit idle before the server ends it (`idle_session_timeout`,
   * PostgreSQL 14 and later), in ms: a head whose process froze gives up the room after it.
   */
  readonly idleTimeout: number;
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
  /** True while anyone here waits for `resource` (see {@link WaitingRooms.enter}). */
  waitedFor(resource: string): boolean;
}

/** The SQLSTATE of a statement cancelled by `pg_cancel_backend` (`query_canceled`). */
const QUERY_CANCELED = "57014";

/**
 * How long a place stays in the room after the last waiter here stopped waiting (ms): a locker
 * that waits again soon — in a loop, the next caller's lock right after its release — keeps its
 * place, rather than give a connection back and check one out again each time.
 */
const LINGER_MS = 250;

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
  /** Gives the place up once it has lingered (see {@link LINGER_MS}) with nobody here waiting. */
  linger: NodeJS.Timeout | undefined;
  /** True once a cancel was sent for it. */
  cancelled: boolean;
  /** True when it ended for want of a connection: not taken again while its key is waited for. */
  failed: boolean;
  /**
   * True when its connection failed after it had queued (terminated, or the server went away): its
   * locker takes a new place at the back rather than race those still in line.
   */
  lost: boolean;
  /** True for a place taken again after a lost one: it hears no release until its turn comes. */
  readonly rejoining: boolean;
  /** True once its connection went back to the pool (or was destroyed). */
  released: boolean;
}

function ignore(): void {}

/**
 * A place whose connection is shared with other sessions (a pooler: see pooler.ts) fails for good:
 * its locker waits without one.
 */
function moved(place: Place): Error {
  place.failed = true;
  return new Error("a waiting room's connection is shared with other sessions (a pooler)");
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
 * again. Now, while a locker waits for a key held by another, one connection from its pool blocks
 * in `pg_advisory_lock` on the key's *room* (a lock id of its own): its place. The locker whose
 * place holds the room is the key's head: only it acts on the key's release notifications, and it
 * tries at once when it enters the room (a release may have come while it queued). When it takes
 * the key, it leaves the room — the next locker in line enters — and queues again at the back. A
 * place stays in line for {@link LINGER_MS} after nobody here waits any more, for the locker that
 * waits again at once; one whose turn comes while nobody here waits leaves the room.
 *
 * The room orders tries; it excludes nobody. The key's own lock is the lock, as before: a locker
 * without a place (more keys waited for than {@link WaitingRoomsHost.limit}, a pool that gave no
 * connection, a place's connection that failed) acts on every notification, as every locker did,
 * and every waiter still polls as its safety net. A locker that dies or disconnects leaves the room
 * with its connection (PostgreSQL frees a session's advisory locks). A place given up while it
 * queues is cancelled with `pg_cancel_backend`; a connection that a cancel might still reach is
 * destroyed rather than pooled, so a late cancel never hits the pool's next user, and a room's lock
 * never goes back to the pool.
 */
export class WaitingRooms {
  readonly #host: WaitingRoomsHost;
  readonly #places = new Map<string, Place>();
  /**
   * Resources whose place found no connection: not taken again until nobody here waits for them
   * (their waiters hear every release meanwhile, as without rooms).
   */
  readonly #failed = new Set<string>();
  /** Settles when each place's connection is back (see {@link close}). */
  readonly #running = new Set<Promise<void>>();

  constructor(host: WaitingRoomsHost) {
    this.#host = host;
  }

  /**
   * The first caller here to wait for `resource` came: keep its place, or take one unless the key
   * is held here (see {@link heldElsewhere}).
   */
  enter(resource: string): void {
    const place = this.#places.get(resource);
    if (place !== undefined) {
      clearTimeout(place.linger);
      place.linger = undefined;
    } else if (!this.#host.heldHere(resource)) this.#start(resource);
  }

  /** A try here found `resource` held by another locker: take a place if it is waited for here. */
  heldElsewhere(resource: string): void {
    if (this.#host.waitedFor(resource)) this.#start(resource);
  }

  /** Nobody here waits for `resource` any more: its place lingers, then is given up. */
  leave(resource: string): void {
    this.#failed.delete(resource);
    const place = this.#places.get(resource);
    if (place === undefined || place.state === "leaving") return;
    // Its turn, if it is the head, is over: nobody here tries any more.
    place.endTurn?.();
    place.linger ??= setTimeout(() => this.#giveUp(place), LINGER_MS).unref();
  }

  /**
   * Whether a release notification of `resource` should wake its waiters here: not while this
   * locker's place waits in the room behind others (the head tries; our turn comes), nor while a
   * place taken again after a lost one is on its way to the back of the line.
   */
  hears(resource: string): boolean {
    const place = this.#places.get(resource);
    return place === undefined || (place.state !== "queued" && !(place.rejoining && place.state === "connecting"));
  }

  /** This locker took `resource`: the head's turn ends, and its place queues again. */
  acquired(resource: string): void {
    this.#places.get(resource)?.endTurn?.();
  }

  /** Gives up every place; resolves once every place's connection is back. */
  async close(): Promise<void> {
    for (const place of this.#places.values()) this.#giveUp(place);
    await Promise.all(this.#running);
  }

  #start(resource: string, rejoining = false): void {
    const host = this.#host;
    if (this.#places.has(resource) || this.#failed.has(resource)) return;
    if (this.#places.size >= host.limit || host.closing()) return;
    const place: Place = {
      resource,
      room: roomOf(resource),
      state: "connecting",
      client: undefined,
      pid: 0,
      endTurn: undefined,
      linger: undefined,
      cancelled: false,
      failed: false,
      lost: false,
      rejoining,
      released: false,
    };
    this.#places.set(resource, place);
    const running = this.#run(place).finally(() => {
      clearTimeout(place.linger);
      this.#running.delete(running);
      if (this.#places.get(resource) === place) this.#places.delete(resource);
      if (place.failed && this.#host.waitedFor(resource)) this.#failed.add(resource);
      // Lost (its connection ended), or given up and then waited for again before it was gone: a
      // new place, at the back of the line.
      else if (this.#host.waitedFor(resource)) this.#start(resource, place.lost);
    });
    this.#running.add(running);
  }

  /** A place's life: queue in the room, take a turn as head, queue again; until given up. */
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
    // A checked-out connection that fails emits "error" (the pool listens only while it is idle):
    // the statement in flight rejects as well, which is what ends the place. A destroyed
    // connection keeps this listener: a socket error after the end must not crash the process.
    client.on("error", ignore);
    let reusable = false;
    let holdsRoom = false;
    const token = newToken();
    try {
      const idleBefore = await this.#claim(place, client, token);
      /** True once a cancel ended the wait for the room: none is left to arrive later. */
      let cancelTaken = false;
      while (place.state !== "leaving" && !this.#host.closing()) {
        place.state = "queued";
        try {
          // Only on the connection this place claimed (see pooler.ts): its pid is the one to cancel.
          const { rows } = await client.query({
            text: `WITH s AS MATERIALIZED (SELECT ${sameSession(2)} AS same)
              SELECT s.same, CASE WHEN s.same THEN pg_advisory_lock($1::bigint) END AS entered FROM s`,
            values: [place.room, token],
          });
          if ((rows[0] as { same?: unknown } | undefined)?.same !== true) throw moved(place);
          holdsRoom = true;
        } catch (error) {
          // Given up while it queued: the cancel ended this statement, and the room was not taken.
          if (!place.cancelled || (error as { code?: unknown }).code !== QUERY_CANCELED) throw error;
          cancelTaken = true;
          break;
        }
        if ((place.state as PlaceState) === "leaving") break;
        place.state = "head";
        // Nobody here waits any more (the place lingered): leave the room rather than queue again.
        if (!this.#host.waitedFor(place.resource)) break;
        await this.#takeTurn(place, client);
        await this.#leaveRoom(place, client, token);
        holdsRoom = false;
      }
      if (holdsRoom) await this.#leaveRoom(place, client, token);
      const reset = idleBefore === null ? "" : "AND set_config('idle_session_timeout', $2, false) IS NOT NULL";
      await client.query({
        text: `SELECT CASE WHEN ${sameSession(1)} THEN set_config('${CLAIM_SETTING}', '', false) = '' ${reset} END AS reset`,
        values: idleBefore === null ? [token] : [token, idleBefore],
      });
      // A cancel sent after the room was granted may still arrive: such a connection never goes back.
      reusable = cancelTaken || !place.cancelled;
    } catch {
      // Its connection failed after it queued: its locker takes a new place, at the back.
      place.lost = (place.state === "queued" || place.state === "head") && !place.cancelled && !place.failed;
    } finally {
      place.state = "leaving";
      if (!place.released) {
        place.released = true;
        if (reusable) client.removeListener("error", ignore);
        client.release(!reusable);
      }
    }
  }

  /**
   * Claims the place's connection (see pooler.ts), reads its pid for `pg_cancel_backend`, and sets
   * its `idle_session_timeout` (PostgreSQL 14 and later); answers that setting as it was before
   * (null where there is none), to put it back. Throws when the connection carries another
   * session (a pooler shares it): the place fails.
   */
  async #claim(place: Place, client: PostgresPoolClient, token: string): Promise<string | null> {
    const { rows } = await client.query({
      text: `WITH c AS MATERIALIZED (SELECT coalesce(current_setting('${CLAIM_SETTING}', true), '') = '' AS free,
          current_setting('idle_session_timeout', true) AS idle)
        SELECT pg_backend_pid() AS pid, c.idle,
          CASE WHEN c.free THEN set_config('${CLAIM_SETTING}', $1, false) = $1
            AND (c.idle IS NULL OR set_config('idle_session_timeout', $2, false) IS NOT NULL) ELSE false END AS claimed
        FROM c`,
      values: [token, `${this.#host.idleTimeout}ms`],
    });
    const row = rows[0] as { pid: number; idle: string | null; claimed: boolean } | undefined;
    if (row?.claimed !== true) throw moved(place);
    place.pid = row.pid;
    return row.idle;
  }

  /** Unlocks the room (only on the place's own connection: see pooler.ts). */
  async #leaveRoom(place: Place, client: PostgresPoolClient, token: string): Promise<void> {
    const { rows } = await client.query({
      text: `SELECT CASE WHEN ${sameSession(2)} THEN pg_advisory_unlock($1::bigint) END AS left, ${sameSession(2)} AS same`,
      values: [place.room, token],
    });
    if ((rows[0] as { same?: unknown } | undefined)?.same !== true) throw moved(place);
  }

  /**
   * The head's turn: wakes the waiters here and waits until the key is taken here or nobody here
   * waits. The connection is idle meanwhile: a `SELECT 1` every half idle timeout keeps the server
   * from ending it (it ends it only once this process stops sending them).
   */
  async #takeTurn(place: Place, client: PostgresPoolClient): Promise<void> {
    // A connection that ends during the turn has left the room (the server freed its lock): the
    // turn ends with it, and the place queues again at the back.
    let ended: (() => void) | undefined;
    const turn = new Promise<void>((resolve, reject) => {
      place.endTurn = resolve;
      ended = () => reject(new Error("the place's connection ended during its turn"));
    });
    const onEnd = (): void => ended?.();
    client.on("end", onEnd);
    client.on("error", onEnd);
    const keepAlive = setInterval(() => {
      client.query({ text: "SELECT 1" }).catch(() => undefined);
    }, this.#host.idleTimeout / 2).unref();
    try {
      this.#host.wake(place.resource);
      await turn;
    } finally {
      clearInterval(keepAlive);
      client.removeListener("end", onEnd);
      client.removeListener("error", onEnd);
      place.endTurn = undefined;
    }
  }

  /** Nobody here waits for the place's key any more: leave the room. */
  #giveUp(place: Place): void {
    clearTimeout(place.linger);
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
