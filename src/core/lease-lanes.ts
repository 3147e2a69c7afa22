import { ChainList } from "../internal/intrusive-list.js";
import type { Acquisition } from "./acquisition.js";

/**
 * One schedule of a {@link Lane}. An acquisition says which list of its lane it is in with a tag
 * in its flags (see `Acquisition.listTag`), not with a reference: one field fewer per held lock.
 */
export class LeaseList extends ChainList<Acquisition> {
  constructor(
    /** This list's tag (1–3), unique within its lane. */
    readonly tag: number,
  ) {
    super();
  }

  protected holds(acquisition: Acquisition): boolean {
    return acquisition.listTag === this.tag;
  }

  protected mark(acquisition: Acquisition, entered: boolean): void {
    acquisition.listTag = entered ? this.tag : 0;
  }
}

const byRetry = (acquisition: Acquisition): number => acquisition.retryAt;
const byDeadline = (acquisition: Acquisition): number => acquisition.validUntil;

/** Held acquisitions of one lease length, on three schedules (see `LeaseKeeper`). */
export class Lane {
  /**
   * Waiting for their next extension, by deadline: their due time is their deadline less what
   * the keeper keeps ahead of it, the same for every lease of the lane (see `LeaseKeeper`).
   */
  readonly idle = new LeaseList(1);
  /** Waiting to retry a failed extension, by retry time. */
  readonly retry = new LeaseList(2);
  /** Extension sent (or about to be), by validity deadline. */
  readonly pending = new LeaseList(3);

  constructor(readonly duration: number) {}

  /** Takes `acquisition` out of whichever of this lane's lists it is in. */
  unlist(acquisition: Acquisition): void {
    const tag = acquisition.listTag;
    if (tag === 0) return;
    (tag === 1 ? this.idle : tag === 2 ? this.retry : this.pending).remove(acquisition);
  }

  /** True when it holds no lease. */
  get empty(): boolean {
    return this.idle.size + this.retry.size + this.pending.size === 0;
  }

  /** Files `acquisition` to be extended ahead of its deadline. */
  scheduleExtension(acquisition: Acquisition): void {
    this.idle.insertSorted(acquisition, byDeadline);
  }

  /** Files `acquisition` to retry its extension at its `retryAt` time. */
  scheduleRetry(acquisition: Acquisition): void {
    this.retry.insertSorted(acquisition, byRetry);
  }

  /** Files `acquisition` by its deadline (its extension is sent, or it is left to expire). */
  watchDeadline(acquisition: Acquisition): void {
    this.pending.insertSorted(acquisition, byDeadline);
  }
}

/**
 * The lanes of a keeper, one per lease length (the locker's `expiry`, and any an acquisition sets):
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

  /** Takes `acquisition` out of whichever list of its lane it is in. */
  unlist(acquisition: Acquisition): void {
    if (acquisition.listTag !== 0) this.get(acquisition.duration)?.unlist(acquisition);
  }

  /** True when no lane holds a lease. */
  get empty(): boolean {
    for (const lane of this.values()) {
      if (!lane.empty) return false;
    }
    return true;
  }

  /**
   * The earliest due time, retry time or deadline of any lane (`Infinity` when nothing is
   * scheduled); `dueOf` gives a waiting lease's due time.
   */
  next(dueOf: (acquisition: Acquisition) => number): number {
    let next = Number.POSITIVE_INFINITY;
    for (const lane of this.values()) {
      if (lane.idle.head !== undefined) next = Math.min(next, dueOf(lane.idle.head));
      if (lane.retry.head !== undefined) next = Math.min(next, lane.retry.head.retryAt);
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
