import { performance } from "node:perf_hooks";
import { type ExtendOutcome, MAX_EXTEND_BATCH } from "../backend.js";
import { LockLostError, type LockLostReason } from "../errors.js";
import { extendChannel, publishLost } from "../internal/diagnostics.js";
import { InFlight } from "../internal/in-flight.js";
import type { LeaseKeeperStats } from "../locker.js";
import type { Acquisition } from "./acquisition.js";
import { reportExtension } from "./extension-report.js";
import { type Lane, Lanes } from "./lease-lanes.js";
import { MAX_TIMER_DELAY_MS } from "./limits.js";
import type { Store } from "./store.js";

/** What the {@link LeaseKeeper} needs from its locker. */
export interface LeaseKeeperSettings {
  /** The store the leases are extended in. */
  readonly store: Store;
  readonly operationTimeout: number;
  /** How many extension commands (each up to {@link MAX_EXTEND_BATCH} locks) may be in flight. */
  readonly sweepConcurrency: number;
  /** The user's hook; errors it throws are swallowed. */
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
  /** Called when an acquisition stops being held because its lock was lost. */
  readonly onLost: (acquisition: Acquisition) => void;
  /** Registers an in-flight store operation so that `close()` can wait for it. */
  readonly track: <T>(operation: Promise<T>) => Promise<T>;
}

/**
 * Keeps a locker's held locks alive and notices when one is lost.
 *
 * Every lease is scheduled from its own deadline, never from a global tick: its next extension is
 * due half its lease before its deadline (about half its lease after the command that last set its
 * TTL was sent), and no later than its deadline minus the command timeout (plus 10 % for the timeout's own lateness) minus a margin for
 * this process's timer lateness, which the keeper measures as it runs. So a fresh lease on a slow
 * link is extended in time, and an extension that answers within the timeout always lands before
 * the deadline. A transient failure is retried while there is time left; a lease whose deadline
 * passes without a confirmed extension is declared lost then (its holder is not cancelled).
 *
 * One timer serves the whole keeper: it fires at the earliest due time or deadline and takes
 * every lease due within a short window, so leases acquired close together are extended together,
 * in batches of up to {@link MAX_EXTEND_BATCH} per command, earliest deadline first, with at most
 * `sweepConcurrency` commands in flight. Leases sit in intrusive lists sorted by deadline (a lease
 * waiting for its extension is due a fixed time before it, the same for its whole lane; one waiting
 * to retry, by its retry time), so adding and releasing one costs O(1) and no allocation however
 * many are held, and a held lease keeps no due time of its own.
 */
export class LeaseKeeper {
  readonly #settings: LeaseKeeperSettings;
  /** One lane per lease length (an acquisition may set its own `expiry`). */
  readonly #lanes = new Lanes();
  /** Batches collected but not yet sent (the in-flight limit was reached). */
  readonly #backlog: Acquisition[][] = [];
  /** Extension commands in flight (`stop()` waits for them). */
  readonly #inFlight = new InFlight();
  #size = 0;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  /** The pass that declares overdue leases lost, when one is scheduled (see {@link #expireOverdue}). */
  #overdueCheck: NodeJS.Immediate | undefined;
  /** A pass for a lease due already, in this turn's check phase (see {@link #arm}). */
  #soon: NodeJS.Immediate | undefined;
  /** Decaying estimate of how late the timer fires, in ms. */
  #lateness = 0;
  /**
   * While anyone listens for extensions: when the timer that collected each waiting batch was
   * meant to fire (the sweep lag is measured from it). Made on first use.
   */
  #plannedAt: WeakMap<Acquisition[], number> | undefined;
  #stopped = false;
  #stats = { extensions: 0, batches: 0, retries: 0, minHeadroomMs: Number.POSITIVE_INFINITY, maxLatenessMs: 0 };

  /** @param settings the store, the bounds and the hooks (see {@link LeaseKeeperSettings}). */
  constructor(settings: LeaseKeeperSettings) {
    this.#settings = settings;
  }

  /** Number of acquisitions held (and extended). */
  get size(): number {
    return this.#size;
  }

  /** What the keeper measured so far. */
  get stats(): LeaseKeeperStats {
    return { ...this.#stats };
  }

  /**
   * Starts keeping a fresh grant alive. A grant valid until `Infinity` (a store whose locks are
   * held by their process until released: memory) is only counted: nothing to extend or watch.
   */
  add(acquisition: Acquisition): void {
    this.#size += 1;
    if (acquisition.validUntil === Number.POSITIVE_INFINITY) return;
    const lane = this.#lanes.of(acquisition.duration);
    if (this.#stopped || acquisition.keepAlive === "never") {
      // Left to expire: only its deadline is watched.
      lane.watchDeadline(acquisition);
      this.#arm(acquisition.validUntil);
      return;
    }
    lane.scheduleExtension(acquisition);
    this.#arm(this.#dueTime(acquisition));
  }

  /** Stops keeping `acquisition` (being released); returns true if it was held. */
  remove(acquisition: Acquisition): boolean {
    if (acquisition.state !== "held") return false;
    this.#lanes.unlist(acquisition);
    this.#size -= 1;
    // The timer may be armed for this lease's far deadline: with nothing else scheduled, it goes
    // too. (A lease kept alive leaves it armed: the next grant often reuses it.)
    if (acquisition.keepAlive !== "always" && this.#timer !== undefined && this.#lanes.empty) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#timerAt = Number.POSITIVE_INFINITY;
    }
    if (this.#soon !== undefined && this.#lanes.empty) {
      clearImmediate(this.#soon);
      this.#soon = undefined;
    }
    return true;
  }

  /** Declares `acquisition` lost (once): aborts its `lost` signal and calls the hooks. */
  markLost(acquisition: Acquisition, given: LockLostReason, cause?: unknown): void {
    if (!this.remove(acquisition)) return;
    // A lease its maxHold stopped extending that runs out was lost to its cap.
    const reason = given === "expired" && acquisition.capReached ? "max-hold" : given;
    const error = new LockLostError(acquisition.key, reason, cause === undefined ? undefined : { cause });
    acquisition.markLost(error);
    // A lease that was not to be extended expiring is what its holder asked for, not a loss to report.
    const expected = acquisition.keepAlive === "never" && reason === "expired";
    publishLost(acquisition.owner, error, expected);
    try {
      if (!expected) this.#settings.onLockLost?.(error);
    } catch {
      // A throwing hook must not break the keeper or surface as an unhandled rejection.
    }
    this.#settings.onLost(acquisition);
  }

  /** Declares lost every held acquisition whose token is in `tokens` (a rare event: a scan). */
  markLostByToken(tokens: ReadonlySet<string>, reason: LockLostReason, cause?: unknown): void {
    for (const acquisition of this.#lanes.withTokens(tokens)) this.markLost(acquisition, reason, cause);
    this.#rearm();
  }

  /**
   * Stops extending at once (held locks then expire). Deadlines stay watched, so leases still
   * report their loss when their validity runs out. Resolves when no extension is in flight.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#backlog.length = 0;
    this.#lanes.stopExtending();
    this.#rearm();
    await this.#inFlight.drained();
  }

  /**
   * When `acquisition`'s next extension is due, from its deadline alone: half its lease before it
   * (about half its lease after the command that set its TTL was sent: that much less the drift
   * allowance, so a little early), and early enough that an answer within the command timeout
   * (which may itself fire up to 10 % late) arrives before the deadline, with room for this
   * process's measured timer lateness. The margin is capped at an eighth of the lease, so
   * extensions never run back to back. Whole ms, rounded down (see {@link Acquisition}).
   */
  #dueTime(acquisition: Acquisition): number {
    return Math.floor(acquisition.validUntil - this.#ahead(acquisition.duration));
  }

  /** How long before its deadline a lease of `duration` is due (see {@link #dueTime}). */
  #ahead(duration: number): number {
    const margin = Math.min(duration / 8, 5 + 2 * this.#lateness);
    return Math.max(duration / 2, this.#lead(duration) + margin);
  }

  /** {@link #dueTime} as a function (made once). */
  readonly #dueOf = (acquisition: Acquisition): number => this.#dueTime(acquisition);

  /**
   * How long before its deadline an extension must be sent to land in time: the command timeout
   * plus 10 % (the timeout's own lateness) — but at most half the lease, so a lease shorter than
   * the timeout allows (an acquisition's own `expiry`) is still extended about half-way through its
   * life, never back to back; an extension slower than that half lands too late and the lease is
   * reported lost.
   */
  #lead(duration: number): number {
    return Math.min(this.#settings.operationTimeout * 1.1, duration / 2);
  }

  /**
   * Makes sure a pass runs no later than `at`: the timer, or, for a lease due already (a grant
   * handed over with the short TTL of the hand-off grace), a pass in this turn's check phase. That
   * leaves the timer as it is: re-arming it costs a clear and a set, which a waiter that was just
   * handed a key would pay before its `lock` resolves (tens of µs on cold caches). The pass
   * re-arms the timer for what is due next.
   */
  #arm(at: number): void {
    if (this.#soon !== undefined || (this.#timer !== undefined && this.#timerAt <= at)) return;
    const now = performance.now();
    if (at <= now) {
      // Not unref'ed: it runs in this turn anyway, and unref'ing the only immediate costs a call
      // into the event loop.
      this.#soon = setImmediate(this.#onSoon);
      return;
    }
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const delay = Math.min(MAX_TIMER_DELAY_MS, Math.max(0, Math.ceil(at - now)));
    // Lateness is measured from when the timer could first fire: a due time already past when the
    // timer is armed is not the timer's lateness.
    this.#timerAt = Math.max(at, now);
    this.#timer = setTimeout(() => this.#onTimer(), delay);
    this.#timer.unref();
  }

  /** Arms the timer for the earliest event of any lane, or leaves it off when nothing is held. */
  #rearm(): void {
    const next = this.#lanes.next(this.#dueOf);
    if (next !== Number.POSITIVE_INFINITY) this.#arm(next);
  }

  #onTimer(): void {
    const now = performance.now();
    const plannedAt = this.#timerAt;
    const late = Math.max(0, now - plannedAt);
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    // Only timers that fired for a due time count: a timer clamped to the maximum delay fires early.
    this.#lateness = Math.max(late, this.#lateness * 0.9);
    this.#stats.maxLatenessMs = Math.max(this.#stats.maxLatenessMs, late);
    this.#pass(now, plannedAt);
  }

  /** The pass {@link #arm} scheduled for a lease due already: no timer, so no lateness to measure. */
  readonly #onSoon = (): void => {
    this.#soon = undefined;
    const now = performance.now();
    this.#pass(now, now);
  };

  /** Sends the extensions due by `now` (planned for `plannedAt`) and arms for the next. */
  #pass(now: number, plannedAt: number): void {
    for (const [duration, lane] of this.#lanes) {
      if (this.#overdueCheck === undefined && (lane.pending.head?.validUntil ?? Number.POSITIVE_INFINITY) <= now) {
        // Its extension's answer may be waiting in the socket: decide after the poll phase reads it.
        this.#overdueCheck = setImmediate(this.#expireOverdue);
        this.#overdueCheck.unref();
      }
      if (!this.#stopped) this.#collectDue(lane, now, plannedAt);
      if (lane.empty) this.#lanes.delete(duration);
    }
    this.#pump();
    this.#rearm();
  }

  /**
   * Declares lost every lease whose deadline passed without a confirmed extension. Runs in the
   * check phase, after the poll phase has read every answer already waiting (a timer fires before
   * it), so an extension confirmed in time but read late — this process stalled — wins.
   */
  readonly #expireOverdue = (): void => {
    this.#overdueCheck = undefined;
    const now = performance.now();
    for (const [duration, lane] of this.#lanes) {
      for (let head = lane.pending.head; head !== undefined && head.validUntil <= now; head = lane.pending.head) {
        this.markLost(head, "expired");
      }
      if (lane.empty) this.#lanes.delete(duration);
    }
    this.#rearm();
  };

  /**
   * Moves every lease due within a short window (a sixteenth of its lease) into
   * batches: extending a little early is always safe and lets leases acquired close together
   * share a command. A lease already past its deadline (a blocked event loop) is lost, not
   * extended. Each full batch is sent as soon as it is collected (within the in-flight limit), so
   * the store works on the first while the rest of a large round is being collected.
   */
  #collectDue(lane: Lane, now: number, plannedAt: number): void {
    const horizon = now + lane.duration / 16;
    // An idle lease is due this long before its deadline (its list is sorted by deadline).
    const ahead = Math.ceil(this.#ahead(lane.duration));
    // Batches are sized up front (at most every lease of the lane, at most a full batch) and cut to
    // what they got: no copies as they fill.
    let left = lane.idle.size + lane.retry.size;
    let batch = batchFor(left);
    let filled = 0;
    for (const list of [lane.retry, lane.idle]) {
      const retrying = list === lane.retry;
      for (
        let head = list.head;
        head !== undefined && (retrying ? head.retryAt : head.validUntil - ahead) <= horizon;
        head = list.head
      ) {
        list.remove(head);
        left -= 1;
        if (head.validUntil <= now) {
          this.markLost(head, "expired");
          continue;
        }
        lane.watchDeadline(head);
        // Its maxHold: no extension may carry it past its cap; it runs out instead.
        if (now + lane.duration > head.holdUntil) {
          head.reachCap();
          continue;
        }
        batch[filled] = head;
        filled += 1;
        if (filled === MAX_EXTEND_BATCH) {
          this.#enqueue(batch, plannedAt);
          this.#pump();
          batch = batchFor(left);
          filled = 0;
        }
      }
    }
    if (filled > 0) {
      batch.length = filled;
      this.#enqueue(batch, plannedAt);
    }
  }

  /** Queues `batch` for sending; remembers when it was planned while anyone listens. */
  #enqueue(batch: Acquisition[], plannedAt: number): void {
    this.#backlog.push(batch);
    if (extendChannel.hasSubscribers) {
      this.#plannedAt ??= new WeakMap();
      this.#plannedAt.set(batch, plannedAt);
    }
  }

  /** Sends waiting batches while fewer than `sweepConcurrency` commands are in flight. */
  #pump(): void {
    while (this.#inFlight.count < this.#settings.sweepConcurrency && !this.#stopped) {
      const batch = this.#backlog.shift();
      if (batch === undefined) return;
      // Leases released (or lost) since the batch was collected are dropped, in place; so are
      // leases whose validity ran out meanwhile (the batch waited for a free slot, or the sweep
      // that collected it ran long): they are lost now, not extended.
      const now = performance.now();
      let live = 0;
      for (let index = 0; index < batch.length; index++) {
        const acquisition = batch[index] as Acquisition;
        if (acquisition.state !== "held") continue;
        if (acquisition.validUntil <= now) this.markLost(acquisition, "expired");
        else batch[live++] = acquisition;
      }
      batch.length = live;
      if (live > 0) void this.#extend(batch, this.#plannedAt?.get(batch));
    }
  }

  /**
   * Extends one batch (leases of one lane) and files each lease by its outcome; never rejects.
   * `plannedAt`: when the timer that collected it was meant to fire, if anyone listened then.
   */
  async #extend(batch: Acquisition[], plannedAt: number | undefined): Promise<void> {
    this.#stats.batches += 1;
    const { duration } = batch[0] as Acquisition;
    // Each lease's deadline before this extension: its headroom once confirmed (see stats).
    const deadlines = new Float64Array(batch.length);
    for (let index = 0; index < batch.length; index++) deadlines[index] = (batch[index] as Acquisition).validUntil;
    // Only while anyone listens: the time sent, and how late that was.
    const sentAt = extendChannel.hasSubscribers ? performance.now() : undefined;
    const lagMs = sentAt === undefined || plannedAt === undefined ? 0 : Math.max(0, sentAt - plannedAt);
    let outcomes: ExtendOutcome[];
    try {
      const { track, store } = this.#settings;
      outcomes = await this.#inFlight.track(track(store.extend(batch, duration)));
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      outcomes = batch.map(() => failure);
    }
    const now = performance.now();
    // Reported before they are acted on: an extension that found a lease taken precedes its loss.
    if (sentAt !== undefined && extendChannel.hasSubscribers) reportExtension(batch, outcomes, lagMs, now - sentAt);
    const lane = this.#lanes.of(duration);
    let minDeadline = Number.POSITIVE_INFINITY;
    for (let index = 0; index < batch.length; index++) {
      const acquisition = batch[index] as Acquisition;
      if (acquisition.state !== "held") continue;
      const outcome = outcomes[index];
      if (outcome === "extended") {
        minDeadline = Math.min(minDeadline, deadlines[index] ?? now);
        this.#extended(acquisition, lane, now);
      } else if (outcome === "taken" || outcome === "expired") this.markLost(acquisition, outcome);
      else if (outcome instanceof LockLostError) this.markLost(acquisition, outcome.reason, outcome.cause);
      else this.#scheduleRetry(acquisition, now);
    }
    if (minDeadline !== Number.POSITIVE_INFINITY) {
      this.#stats.minHeadroomMs = Math.min(this.#stats.minHeadroomMs, minDeadline - now);
    }
    this.#pump();
    this.#rearm();
  }

  /**
   * Files a lease whose extension was confirmed: next due, or (not to be extended) its deadline. A
   * store may confirm less validity than half the lease (a quorum whose round trip and drift
   * allowance took more than that): such a lease would be due again at once, and the keeper would
   * extend it back to back. It waits an eighth of its lease instead (filed as a retry), so a pass
   * that collects early, up to a sixteenth ahead, still leaves a gap.
   */
  #extended(acquisition: Acquisition, lane: Lane, now: number): void {
    this.#stats.extensions += 1;
    lane.unlist(acquisition);
    if (acquisition.keepAlive === "once") acquisition.keepAlive = "never";
    if (this.#stopped || acquisition.keepAlive === "never") {
      lane.watchDeadline(acquisition);
      return;
    }
    const pause = acquisition.duration / 8;
    if (this.#dueTime(acquisition) < now + pause) {
      acquisition.retryAt = Math.floor(now + pause);
      lane.scheduleRetry(acquisition);
      return;
    }
    lane.scheduleExtension(acquisition);
  }

  /**
   * A transient failure: try again soon (an eighth of the lease), and at the latest when one more
   * command timeout still fits before the deadline. The lease stays lost-at-deadline meanwhile.
   */
  #scheduleRetry(acquisition: Acquisition, now: number): void {
    this.#stats.retries += 1;
    if (this.#stopped) return; // stays in pending: its deadline is watched
    const lane = this.#lanes.of(acquisition.duration);
    const timeLeft = acquisition.validUntil - now;
    const lastChance = timeLeft - this.#lead(acquisition.duration);
    lane.unlist(acquisition);
    acquisition.retryAt = Math.floor(now + Math.max(1, Math.min(acquisition.duration / 8, lastChance)));
    lane.scheduleRetry(acquisition);
  }
}

/**
 * An empty extension batch sized for `left` more leases, at most a full batch (a loss reported
 * while collecting may add leases: then it grows as any array does).
 */
function batchFor(left: number): Acquisition[] {
  return new Array<Acquisition>(Math.max(0, Math.min(MAX_EXTEND_BATCH, left)));
}
