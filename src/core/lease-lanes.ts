import { IntrusiveList } from "../internal/intrusive-list.js";
import type { Acquisition } from "./acquisition.js";

const byDue = (acquisition: Acquisition): number => acquisition.due;
const byDeadline = (acquisition: Acquisition): number => acquisition.validUntil;

/** Held acquisitions of one lease length, on three schedules (see `LeaseKeeper`). */
export class Lane {
  /** Waiting for their next extension, by due time. */
  readonly idle = new IntrusiveList<Acquisition>();
  /** Waiting to retry a failed extension, by due time. */
  readonly retry = new IntrusiveList<Acquisition>();
  /** Extension sent (or about to be), by validity deadline. */
  readonly pending = new IntrusiveList<Acquisition>();

  constructor(readonly duration: number) {}

  /** True when it holds no lease. */
  get empty(): boolean {
    return this.idle.size + this.retry.size + this.pending.size === 0;
  }

  /** Files `acquisition` to be extended at its `due` time. */
  scheduleExtension(acquisition: Acquisition): void {
    this.idle.insertSorted(acquisition, byDue);
  }

  /** Files `acquisition` to retry its extension at its `due` time. */
  scheduleRetry(acquisition: Acquisition): void {
    this.retry.insertSorted(acquisition, byDue);
  }

  /** Files `acquisition` by its deadline (its extension is sent, or it is left to expire). */
  watchDeadline(acquisition: Acquisition): void {
    this.pending.insertSorted(acquisition, byDeadline);
  }
}

/**
 * The lanes of a keeper, one per lease length (today every lease of a locker has the same one):
 * a lane is made when a lease of its length is added and dropped once empty.
 */
export class Lanes extends Map<number, Lane> {
  /** The lane of leases of `duration`, made if needed. */
  of(duration: number): Lane {
    const lane = this.get(duration);
    return lane ?? this.#open(duration);
  }

  #open(duration: number): Lane {
    const lane = new Lane(duration);
    this.set(duration, lane);
    return lane;
  }

  /** True when no lane holds a lease. */
  get empty(): boolean {
    for (const lane of this.values()) {
      if (!lane.empty) return false;
    }
    return true;
  }

  /** The earliest due time or deadline of any lane (`Infinity` when nothing is scheduled). */
  next(): number {
    let next = Number.POSITIVE_INFINITY;
    for (const lane of this.values()) {
      if (lane.idle.head !== undefined) next = Math.min(next, lane.idle.head.due);
      if (lane.retry.head !== undefined) next = Math.min(next, lane.retry.head.due);
      if (lane.pending.head !== undefined) next = Math.min(next, lane.pending.head.validUntil);
    }
    return next;
  }

  /** Every lease whose token is in `tokens` (a rare event: a scan). */
  withTokens(tokens: ReadonlySet<string>): Acquisition[] {
    const found: Acquisition[] = [];
    for (const lane of this.values()) {
      for (const list of [lane.idle, lane.retry, lane.pending]) {
        for (let item = list.head; item !== undefined; item = item.next) if (tokens.has(item.token)) found.push(item);
      }
    }
    return found;
  }

  /** Moves every lease waiting for an extension (or its retry) to watch only its deadline. */
  stopExtending(): void {
    for (const lane of this.values()) {
      for (const list of [lane.idle, lane.retry]) {
        for (let item = list.shift(); item !== undefined; item = list.shift()) lane.watchDeadline(item);
      }
    }
  }
}
