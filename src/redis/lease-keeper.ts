import { performance } from "node:perf_hooks";
import { LockLostError, type LockLostReason } from "../errors.js";
import type { Acquisition } from "./acquisition.js";
import type { ExtendOutcome, LockStore } from "./lock-store.js";
import { Sweeper } from "./sweeper.js";

/** What the {@link LeaseKeeper} needs from its locker. */
export interface LeaseKeeperSettings {
  readonly expiry: number;
  readonly operationTimeout: number;
  readonly sweepConcurrency: number;
  /** The user's hook; errors it throws are swallowed. */
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
  /** Called when a key stops being held by this locker because its lock was lost. */
  readonly onLost: (key: string) => void;
  /** Registers an in-flight Redis operation so that `close()` can wait for it. */
  readonly track: <T>(operation: Promise<T>) => Promise<T>;
}

/**
 * Keeps a locker's held locks alive and notices when one is lost: the sweeper extends every held
 * acquisition every `expiry / 2`; a transient failure is retried while the lease has time left; a
 * per-acquisition deadline timer (unref'ed) declares the lock lost when its validity runs out
 * without a successful extension. Tracks acquisitions per token, and how many are held per key.
 *
 * Deadline timers are armed when a sweep starts (and re-armed after each extension), not at
 * acquisition: the first sweep always comes before the first deadline (`expiry / 2` < validity),
 * so a lock released before then, the common case, never costs a timer. `Lease.assertHeld()`
 * checks the deadline itself in between.
 */
export class LeaseKeeper {
  readonly #store: LockStore;
  readonly #settings: LeaseKeeperSettings;
  readonly #sweeper: Sweeper;
  readonly #held = new Set<Acquisition>();
  readonly #heldPerKey = new Map<string, number>();
  #stopped = false;

  constructor(store: LockStore, settings: LeaseKeeperSettings) {
    this.#store = store;
    this.#settings = settings;
    this.#sweeper = new Sweeper(
      Math.floor(settings.expiry / 2),
      settings.sweepConcurrency,
      (acquisition) => this.#extend(acquisition),
      (batch) => {
        for (const acquisition of batch) this.#armDeadline(acquisition);
      },
    );
  }

  /** Number of acquisitions held (and extended). */
  get size(): number {
    return this.#held.size;
  }

  /** True when this locker holds `key` (a lock not released and not known lost). */
  holds(key: string): boolean {
    return this.#heldPerKey.has(key);
  }

  /** Starts keeping a fresh grant alive. */
  add(acquisition: Acquisition): void {
    this.#held.add(acquisition);
    this.#heldPerKey.set(acquisition.key, (this.#heldPerKey.get(acquisition.key) ?? 0) + 1);
    this.#sweeper.add(acquisition);
  }

  /** Stops keeping `acquisition` (being released); returns true if it was held. */
  remove(acquisition: Acquisition): boolean {
    if (acquisition.state !== "held") return false;
    acquisition.clearTimers();
    this.#sweeper.delete(acquisition);
    this.#held.delete(acquisition);
    const count = (this.#heldPerKey.get(acquisition.key) ?? 1) - 1;
    if (count > 0) this.#heldPerKey.set(acquisition.key, count);
    else this.#heldPerKey.delete(acquisition.key);
    return true;
  }

  /** Declares `acquisition` lost (once): aborts its `lost` signal and calls the hook. */
  markLost(acquisition: Acquisition, reason: LockLostReason): void {
    if (!this.remove(acquisition)) return;
    const error = new LockLostError(acquisition.key, reason);
    acquisition.markLost(error);
    try {
      this.#settings.onLockLost?.(error);
    } catch {
      // A throwing hook must not break the sweeper or surface as an unhandled rejection.
    }
    this.#settings.onLost(acquisition.key);
  }

  /**
   * Stops extending at once (held locks then expire). Deadline timers stay armed, so leases still
   * report their loss when their validity runs out. Resolves when a running sweep has finished.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const acquisition of this.#held) {
      clearTimeout(acquisition.retryTimer);
      this.#armDeadline(acquisition);
    }
    await this.#sweeper.stop();
  }

  /** Extends one lock (called by the sweeper and by retries); never rejects. */
  async #extend(acquisition: Acquisition): Promise<void> {
    if (acquisition.state !== "held" || this.#stopped) return;
    const { expiry, operationTimeout, track } = this.#settings;
    let outcome: ExtendOutcome;
    try {
      outcome = await track(this.#store.extend(acquisition.handle, expiry));
    } catch {
      // Transient: retry while the lease still has time left; the deadline timer decides loss.
      if (acquisition.state !== "held" || this.#stopped) return;
      if (acquisition.deadlineTimer === undefined) this.#armDeadline(acquisition);
      const timeLeft = acquisition.handle.validUntil - performance.now();
      const delay = Math.max(1, Math.min(Math.floor(expiry / 8), Math.floor(timeLeft - operationTimeout)));
      clearTimeout(acquisition.retryTimer);
      acquisition.retryTimer = setTimeout(() => void this.#extend(acquisition), delay);
      acquisition.retryTimer.unref();
      return;
    }
    if (acquisition.state !== "held") return;
    if (outcome === "extended") this.#armDeadline(acquisition);
    else this.markLost(acquisition, outcome);
  }

  /** (Re)starts the timer that declares the lock lost when its validity runs out. */
  #armDeadline(acquisition: Acquisition): void {
    clearTimeout(acquisition.deadlineTimer);
    const remaining = Math.max(0, acquisition.handle.validUntil - performance.now());
    acquisition.deadlineTimer = setTimeout(() => this.markLost(acquisition, "expired"), remaining);
    acquisition.deadlineTimer.unref();
  }
}
