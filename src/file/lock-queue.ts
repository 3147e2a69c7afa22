/**
 * A FileLocker's places in its keys' waiting queues, and what each place listens to. Locks queue
 * as a read-write key's writers do (`H.q/<seq>.w.<entry>`, see `permits.ts`):
 *
 * - **Arrival order.** An attempt that misses and joins takes a ticket. An attempt of a locker that
 *   has a ticket for the key, or that saw the key's queue lately, takes the lock only when no live
 *   ticket is ahead of its own: waiters are served in arrival order across processes, and a locker
 *   that just released cannot take the key again ahead of those queued for it.
 * - **One wake-up per release.** A place behind a live ticket waits for that ticket only: it
 *   ignores the events of the key's lock (see {@link LockQueue.quiet}) and watches the queue
 *   directory for the ticket ahead to go. So a release wakes the first in line, and each departure
 *   from the queue the one behind it, instead of every waiting locker trying at every event.
 * - **A view of the queue lasts no longer than a ticket.** The first in line takes the key on a
 *   release without reading the queue again, but only while the read that found it first is
 *   younger than its ticket's lapse: a waiter frozen (SIGSTOP, a blocked event loop) past it may
 *   have lost its ticket to a reader of the queue, and those who queued meanwhile are ahead of it
 *   now. It reads the queue again and, its ticket gone, queues at the back.
 * - **Nothing extra when uncontended.** A locker with no ticket, on a key whose queue it has not
 *   seen lately, tries at once without reading the queue. Such a first try may come before queued
 *   waiters: once, since a miss queues it at the back.
 *
 * Safety never depends on the queue (the lock's rename decides); a ticket whose holder died or
 * stopped refreshing it is removed by whoever reads the queue next, and every waiter still polls
 * on its backoff, which covers a missed event.
 */
import { type FSWatcher, watch } from "node:fs";
import { access } from "node:fs/promises";
import { join } from "node:path";
import { newToken } from "../internal/token.js";
import { remainingMs } from "./entry.js";
import { type PermitFiles, type Ticket, ticketName } from "./permits.js";

/** How many keys a locker remembers as contended lately (past that, it starts afresh). */
const CONTENDED_KEPT = 1024;

/** A locker's place in one key's queue while it waits. */
interface Place {
  /** The key (the core's resource), for the wake-up. */
  readonly resource: string;
  ticket: Ticket;
  /** The name of the live ticket just ahead, as last read; `undefined`: first in line. */
  ahead: string | undefined;
  /**
   * `performance.now()` until which the last read of the queue, which found this place first in
   * line (not only because the ticket ahead went), holds; 0: none did, or a miss since says
   * otherwise. See {@link LockQueue.join}.
   */
  verifiedUntil: number;
  /** Moves on each wake-up by the queue's watcher: an attempt's read older than that is stale. */
  wakes: number;
  watcher: FSWatcher | undefined;
}

/** What an attempt read of a key's queue, for {@link LockQueue.join}. */
export interface QueueLook {
  /** The place's wake count when the read began. */
  readonly wakes: number;
  /** Live tickets ahead of this locker's (all of them, without one), first in line first. */
  readonly ahead: readonly Ticket[];
  /** This locker's own ticket as read (`undefined`: none in the queue). */
  readonly own: Ticket | undefined;
  /**
   * `performance.now()` when the read of the queue began; `undefined`: not read (taken from what
   * this locker knew).
   */
  readonly readAt: number | undefined;
}

/**
 * One FileLocker's places in its keys' queues (at most one per key: the core lets one waiter of a
 * key try at a time), the keys it saw contended lately, and the queue watchers (see the module
 * comment).
 */
export class LockQueue {
  readonly #queue: PermitFiles;
  readonly #ttl: number;
  readonly #wake: (resource: string) => void;
  readonly #places = new Map<string, Place>();
  /** Keys whose queue an attempt saw lately: `performance.now()` until which to read it first. */
  readonly #contended = new Map<string, number>();
  /** Closed: no queue is watched any more. */
  #closed = false;

  /**
   * @param queue the key's queue files
   * @param ttl how long a ticket lasts unless refreshed
   * @param wake tells the core that a key's first waiter here should try now
   */
  constructor(queue: PermitFiles, ttl: number, wake: (resource: string) => void) {
    this.#queue = queue;
    this.#ttl = ttl;
    this.#wake = wake;
  }

  /**
   * Whether an attempt on `hash` reads the queue first: this locker has a ticket there, or saw the
   * queue lately, or the attempt will join it.
   */
  readsFirst(hash: string, joins: boolean): boolean {
    if (joins || this.#places.has(hash)) return true;
    const until = this.#contended.get(hash);
    if (until === undefined) return false;
    if (performance.now() < until) return true;
    this.#contended.delete(hash);
    return false;
  }

  /**
   * Whether an event of the lock directory about `name` (a name of `hash`'s key) is not for this
   * locker's waiters: it waits behind a live ticket (the lock's events are for the first in line),
   * or the event is the queue directory's own (made or removed: nothing about the lock).
   */
  quiet(hash: string, name: string): boolean {
    return this.#places.get(hash)?.ahead !== undefined || name === `${hash}.q`;
  }

  /**
   * This locker's ticket with `grantedToken` when the last read of `hash`'s queue found it first in
   * line, and still holds (nothing since says otherwise, and it is not older than the ticket: see
   * {@link join}): an attempt may then take the key without reading the queue (see {@link lookAsHead}).
   */
  headTicket(hash: string, grantedToken: string | undefined): Ticket | undefined {
    const place = this.#places.get(hash);
    if (place === undefined || place.ahead !== undefined || place.ticket.entry.token !== grantedToken) return undefined;
    return performance.now() < place.verifiedUntil ? place.ticket : undefined;
  }

  /** What {@link look} would say of a place {@link headTicket} found first in line, without reading. */
  lookAsHead(hash: string): QueueLook {
    const place = this.#places.get(hash) as Place;
    return { wakes: place.wakes, ahead: [], own: place.ticket, readAt: undefined };
  }

  /** An attempt as head missed (the lock was held): the next one reads the queue again. */
  unverify(hash: string): void {
    const place = this.#places.get(hash);
    if (place !== undefined) place.verifiedUntil = 0;
  }

  /** Reads `hash`'s live tickets: those ahead of `grantedToken`'s (this locker's), and its own. */
  async look(hash: string, grantedToken: string | undefined): Promise<QueueLook> {
    const wakes = this.#places.get(hash)?.wakes ?? 0;
    const readAt = performance.now();
    const tickets = await this.#queue.tickets(hash);
    const index = grantedToken === undefined ? -1 : tickets.findIndex((ticket) => ticket.entry.token === grantedToken);
    const ahead = index < 0 ? tickets : tickets.slice(0, index);
    // Tickets besides its own: the key is contended (read its queue first for a while).
    if (tickets.length > (index < 0 ? 0 : 1)) this.#sawQueue(hash);
    else this.#contended.delete(hash);
    return { wakes, ahead, own: index < 0 ? undefined : tickets[index], readAt };
  }

  /**
   * After a miss that joins: takes a ticket (or keeps `look.own`) and waits behind the last ticket
   * `look` saw ahead. Resolves to the ticket's token (the attempt's registration).
   */
  async join(resource: string, hash: string, look: QueueLook): Promise<string> {
    const own = look.own ?? this.#places.get(hash)?.ticket;
    const ticket = await this.#queue.register(hash, true, own?.entry.token ?? newToken(), this.#ttl, look.own);
    let place = this.#places.get(hash);
    if (place === undefined) {
      place = { resource, ticket, ahead: undefined, verifiedUntil: 0, wakes: 0, watcher: undefined };
      this.#places.set(hash, place);
    }
    place.ticket = ticket;
    // A wake-up since the read (the ticket ahead went meanwhile): listen to the lock, try again.
    const ahead = place.wakes === look.wakes ? look.ahead.at(-1) : undefined;
    place.ahead = ahead === undefined ? undefined : ticketName(ahead);
    // Verified first in line: the queue was read and nothing was ahead — of its own ticket, kept in
    // its place, or of a new one in a queue that was empty (one that replaced a lost ticket goes to
    // the back, behind those that were after it).
    const first = look.ahead.length === 0 && (look.own === undefined || ticket.seq === look.own.seq);
    place.verifiedUntil = look.readAt !== undefined && first ? this.#verifiedUntil(look.readAt, ticket) : 0;
    // A new ticket (not one kept): the queue directory may be a new one too (it is removed once
    // empty), so the watcher is opened afresh.
    if (look.own === undefined || place.watcher === undefined) {
      place.watcher?.close();
      place.watcher = undefined;
      this.#watch(hash, place);
      // The ticket ahead may have gone before the watcher opened: then nobody would say so.
      if (place.ahead !== undefined && !(await this.#present(hash, place.ahead))) this.#wakeUp(place);
    }
    return ticket.entry.token;
  }

  /**
   * This locker took `hash` (or gave up waiting): its ticket leaves the queue — `own` as read, else
   * the one it knows of, else the one with `token` (looked up in the queue).
   */
  async leave(hash: string, own: Ticket | undefined, token?: string): Promise<void> {
    const place = this.#places.get(hash);
    if (place !== undefined) {
      this.#places.delete(hash);
      place.watcher?.close();
    }
    const ticket = own ?? place?.ticket;
    if (ticket !== undefined) await this.#queue.leaveTicket(hash, ticket);
    else if (token !== undefined) await this.#queue.leave(hash, token);
  }

  /**
   * Stops listening (the locker closes). The places stay: the waiters the close rejects leave
   * the queue after it.
   */
  close(): void {
    this.#closed = true;
    for (const place of this.#places.values()) {
      place.watcher?.close();
      place.watcher = undefined;
    }
    this.#contended.clear();
  }

  /**
   * Until when a read begun at `readAt` that found `ticket` first in line holds: while the ticket
   * lives (whoever reads the queue after it lapsed removes it, and may queue ahead of its return;
   * a ticket kept, not refreshed, may have only half a lapse left), and no longer than a lapse
   * after the read (the ticket may be a new one, taken after a pause that followed the read).
   */
  #verifiedUntil(readAt: number, ticket: Ticket): number {
    return Math.min(readAt + this.#ttl, performance.now() + remainingMs(ticket.entry));
  }

  #sawQueue(hash: string): void {
    if (this.#contended.size >= CONTENDED_KEPT && !this.#contended.has(hash)) this.#contended.clear();
    this.#contended.set(hash, performance.now() + this.#ttl);
  }

  /** Watches `hash`'s queue directory for the ticket ahead of `place` to go. */
  #watch(hash: string, place: Place): void {
    if (this.#closed) return;
    try {
      const watcher = watch(this.#queue.queuePath(hash), { persistent: false });
      watcher.on("change", (_event, filename) => {
        if (filename === null || filename.toString() === place.ahead) this.#wakeUp(place);
      });
      watcher.on("error", () => {
        watcher.close();
        if (place.watcher === watcher) place.watcher = undefined;
        this.#wakeUp(place);
      });
      place.watcher = watcher;
    } catch {
      // No watcher (the queue went meanwhile, no inotify watches left): listen to the lock instead.
      place.ahead = undefined;
    }
  }

  /** The ticket ahead of `place` went (or may have): it listens to the lock, and tries now. */
  #wakeUp(place: Place): void {
    place.ahead = undefined;
    place.wakes += 1;
    this.#wake(place.resource);
  }

  async #present(hash: string, name: string): Promise<boolean> {
    return access(join(this.#queue.queuePath(hash), name)).then(
      () => true,
      () => false,
    );
  }
}
