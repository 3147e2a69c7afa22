import type { Acquisition } from "./acquisition.js";

/**
 * The locker's one auto-extension loop: every `intervalMs` (expiry / 2) it extends every held
 * acquisition, at most `concurrency` at a time. Its timer is unref'ed and runs only while
 * something is held. A sweep that is still running when the next is due is not doubled up.
 */
export class Sweeper {
  readonly #held = new Set<Acquisition>();
  readonly #intervalMs: number;
  readonly #concurrency: number;
  readonly #extendOne: (acquisition: Acquisition) => Promise<void>;
  readonly #beforeSweep: (batch: readonly Acquisition[]) => void;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  /**
   * @param extendOne extends one acquisition; never rejects.
   * @param beforeSweep called synchronously with every acquisition about to be extended.
   */
  constructor(
    intervalMs: number,
    concurrency: number,
    extendOne: (acquisition: Acquisition) => Promise<void>,
    beforeSweep: (batch: readonly Acquisition[]) => void = () => undefined,
  ) {
    this.#intervalMs = intervalMs;
    this.#concurrency = concurrency;
    this.#extendOne = extendOne;
    this.#beforeSweep = beforeSweep;
  }

  /** Starts extending `acquisition`. */
  add(acquisition: Acquisition): void {
    if (this.#stopped) return;
    this.#held.add(acquisition);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), this.#intervalMs);
      this.#timer.unref();
    }
  }

  /** Stops extending `acquisition`. */
  delete(acquisition: Acquisition): void {
    this.#held.delete(acquisition);
    if (this.#held.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Runs one sweep now; resolves when every extension has settled. */
  sweep(): Promise<void> {
    this.#running ??= this.#sweepAll().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /** Stops the timer at once; resolves when a running sweep has finished. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#held.clear();
    await this.#running;
  }

  #tick(): void {
    if (this.#running === undefined) void this.sweep();
  }

  async #sweepAll(): Promise<void> {
    const batch = [...this.#held];
    this.#beforeSweep(batch);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < batch.length && !this.#stopped) {
        const acquisition = batch[next++];
        if (acquisition !== undefined && this.#held.has(acquisition)) await this.#extendOne(acquisition);
      }
    };
    const workers = Array.from({ length: Math.min(this.#concurrency, batch.length) }, worker);
    await Promise.all(workers);
  }
}
