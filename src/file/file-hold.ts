import { performance } from "node:perf_hooks";
import type { ExtendOutcome } from "../diagnostics.js";
import { LockLostError, type LockLostReason } from "../errors.js";
import {
  type DiagnosticSource,
  extendChannel,
  grantTime,
  publishExtend,
  publishLost,
  publishRelease,
} from "../internal/diagnostics.js";
import { LeaseImpl } from "../internal/lease.js";
import { Releasable } from "../internal/release-func.js";
import { withTimeout } from "../internal/sleep.js";
import type { Lease, ReleaseOutcome } from "../locker.js";
import type { Entry, FileStore } from "./store.js";

/** What a {@link FileHold} needs from its locker. */
export interface HoldOwner {
  readonly store: FileStore;
  /** The user's hook; errors it throws are swallowed. */
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
  /** Called once when the hold stops being held (released or lost). */
  ended(hold: FileHold): void;
  /** Called after a release that freed the lock, so that waiters of this locker try at once. */
  freed(key: string): void;
  /** Registers an operation in flight so that `close()` can wait for it. */
  track<T>(operation: Promise<T>): Promise<T>;
  /** The locker in diagnostics messages. */
  readonly diagnostics: DiagnosticSource;
}

/** How long a release may take before it reports `"unknown"` (the lock then expires on its own). */
const RELEASE_TIMEOUT_MS = 5000;

/**
 * One held file lock: its current entry, the timer that extends it from its own deadline (half a
 * lease after the extension — or grant — that set it), and its `lost` signal.
 *
 * An extension renames the entry to a later deadline. It succeeds only while the entry exists, so
 * a success proves that nobody took the lock over meanwhile; a missing entry is a definite loss
 * (`"taken"`, or `"expired"` once the lease had run out). Any other error is transient: retried
 * until the lease runs out, and then the lease is lost (`"expired"`). A hold that is not to be
 * extended (`autoExtend: false`), or whose locker closed, only watches its deadline.
 *
 * Diagnostics (while anyone listens): each extension's outcome (one message per hold; `retry`
 * with the error; `expired` when the timer found the lease run out before it could send one),
 * the loss, and the release with its hold time.
 */
export class FileHold extends Releasable {
  readonly key: string;
  readonly hash: string;
  readonly fencingToken: bigint | undefined;
  readonly #owner: HoldOwner;
  readonly #expiry: number;
  /** Asked for: extend while held (an expiry of a hold not to be extended is no loss to report). */
  readonly #autoExtend: boolean;
  /** Extending now (until the locker closes). */
  #extending: boolean;
  #entry: Entry;
  /** `performance.now()` at which the lease runs out unless extended. */
  #validUntil: number;
  readonly #lost = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  /** The extension in flight, if any. */
  #inFlight: Promise<void> | undefined;
  /** Released or lost: no more extensions. */
  #ended = false;
  /** When it was granted, if anyone listened for releases then. */
  readonly #grantedAt = grantTime();
  /** `performance.now()` the armed timer is due at (for the lag of extension messages). */
  #dueAt = 0;
  /** Released by the locker for a caller that never got it: publishes no release message. */
  #abandoned = false;

  constructor(
    owner: HoldOwner,
    key: string,
    hash: string,
    entry: Entry,
    startedAt: number,
    expiry: number,
    autoExtend: boolean,
    fencingToken: bigint | undefined,
  ) {
    super();
    this.#owner = owner;
    this.key = key;
    this.hash = hash;
    this.#entry = entry;
    this.#expiry = expiry;
    this.#autoExtend = autoExtend;
    this.#extending = autoExtend;
    this.#validUntil = startedAt + expiry;
    this.fencingToken = fencingToken;
    this.#arm();
  }

  /** Aborts with a {@link LockLostError} when the lock is found lost. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** The {@link Lease} of this hold. */
  lease(): Lease {
    return new LeaseImpl({
      key: this.key,
      releaser: this,
      lost: this.#lost.signal,
      validUntil: () => this.#validUntil,
      onDeadlinePassed: () => this.#markLost("expired"),
      fencingToken: this.fencingToken,
    });
  }

  /** Stops extending (the locker closed): the lease runs out at its deadline. */
  stop(): void {
    this.#extending = false;
    if (!this.#ended) this.#arm();
  }

  /** The extension in flight, if any (for `close()`). */
  get settled(): Promise<void> {
    return this.#inFlight ?? Promise.resolve();
  }

  /** One timer per hold: at `at`, else the next extension, or the deadline when not extending. */
  #arm(at?: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const due = at ?? (this.#extending ? this.#validUntil - this.#expiry / 2 : this.#validUntil);
    this.#dueAt = due;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, due - performance.now()));
    this.#timer.unref();
  }

  #fire(): void {
    this.#timer = undefined;
    if (this.#ended) return;
    if (performance.now() >= this.#validUntil) {
      // An extension was due and could not be sent in time (a blocked event loop, say).
      if (this.#extending && this.#inFlight === undefined && extendChannel.hasSubscribers) {
        this.#publishExtend("expired", undefined, this.#lagMs(performance.now()), 0);
      }
      this.#markLost("expired");
      return;
    }
    if (this.#extending && this.#inFlight === undefined) {
      this.#inFlight = this.#owner.track(this.#extend(this.#dueAt)).then((retryAt) => {
        this.#inFlight = undefined;
        if (!this.#ended) this.#arm(retryAt);
      });
    }
    // The deadline stays watched while an extension is in flight (or none is due).
    this.#arm(this.#validUntil);
  }

  /**
   * One extension (due at `dueAt`); resolves to when to retry after a transient error (else
   * `undefined`). Publishes its outcome before acting on it, so a loss follows its extension.
   */
  async #extend(dueAt: number): Promise<number | undefined> {
    const startedAt = performance.now();
    const lagMs = extendChannel.hasSubscribers ? this.#lagMs(startedAt, dueAt) : 0;
    let next: Entry | undefined;
    try {
      next = await this.#owner.store.extend(this.hash, this.#entry, this.#expiry);
    } catch (error) {
      if (extendChannel.hasSubscribers && !this.#ended) {
        const failure = error instanceof Error ? error : new Error(String(error));
        this.#publishExtend("retry", failure, lagMs, performance.now() - startedAt);
      }
      // Transient: try again soon, while the lease lasts (then the deadline declares it lost).
      return Math.min(performance.now() + Math.max(10, this.#expiry / 20), this.#validUntil);
    }
    if (next === undefined) {
      const reason = performance.now() >= this.#validUntil ? "expired" : "taken";
      if (extendChannel.hasSubscribers && !this.#ended) {
        this.#publishExtend(reason, undefined, lagMs, performance.now() - startedAt);
      }
      this.#markLost(reason);
      return undefined;
    }
    if (extendChannel.hasSubscribers && !this.#ended) {
      this.#publishExtend("extended", undefined, lagMs, performance.now() - startedAt);
    }
    // Ours until the new deadline. (After a loss declared meanwhile, a release still finds the entry.)
    this.#entry = next;
    if (!this.#ended) this.#validUntil = startedAt + this.#expiry;
    return undefined;
  }

  /** Declares the hold lost (once): aborts `lost`, calls the hook unless the expiry was asked for. */
  #markLost(reason: LockLostReason): void {
    if (this.#ended) return;
    this.#end();
    const error = new LockLostError(this.key, reason);
    this.#lost.abort(error);
    // A hold not to be extended reaching its expiry is what its holder asked for.
    const expected = !this.#autoExtend && reason === "expired";
    publishLost(this.#owner.diagnostics, error, expected);
    if (!expected) {
      try {
        this.#owner.onLockLost?.(error);
      } catch {
        // A throwing hook must not break the locker or surface as an unhandled rejection.
      }
    }
  }

  #end(): void {
    this.#ended = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#owner.ended(this);
  }

  /** How late the extension due at `dueAt` is at `now`, in ms. */
  #lagMs(now: number, dueAt = this.#dueAt): number {
    return Math.max(0, now - dueAt);
  }

  #publishExtend(outcome: ExtendOutcome, error: Error | undefined, lagMs: number, elapsedMs: number): void {
    const { locker, kind } = this.#owner.diagnostics;
    publishExtend({ key: this.key, keys: [this.key], count: 1, locker, kind, outcome, error, lagMs, elapsedMs });
  }

  /**
   * Releases a hold whose caller never received it (its call was aborted while the attempt was in
   * flight): like `release`, without a release message.
   */
  abandon(): Promise<void> {
    this.#abandoned = true;
    return this.release();
  }

  async releaseRoutine(): Promise<ReleaseOutcome> {
    const outcome = await withTimeout(this.#release(), RELEASE_TIMEOUT_MS, () => new Error("release timed out")).catch(
      (): ReleaseOutcome => "unknown",
    );
    if (this.#abandoned) return outcome;
    return publishRelease(this.#owner.diagnostics, this.key, this.#grantedAt, outcome);
  }

  async #release(): Promise<ReleaseOutcome> {
    // Past the deadline, a timer delayed by a busy event loop has not fired yet: it is expired all the same.
    if (performance.now() >= this.#validUntil) this.#markLost("expired");
    const lostReason = this.#lost.signal.aborted ? (this.#lost.signal.reason as LockLostError).reason : undefined;
    if (!this.#ended) this.#end();
    await this.#inFlight;
    // After a loss the entry is gone (or, past the deadline, still ours to delete): the store says
    // whether another holder has the lock now ("taken") or nobody ("expired").
    const outcome = await this.#owner.track(this.#owner.store.release(this.hash, this.#entry));
    if (outcome === "released") this.#owner.freed(this.key);
    // A lease that ran out is reported expired, even when its entry was still there to delete.
    return lostReason === "expired" ? "expired" : outcome;
  }
}
