/**
 * Timeouts for many short operations without a timer each: pending operations sit in a set, and
 * one unref'ed interval (running only while something is pending) fails those past their deadline.
 * A timeout may fire up to `granularity` late; in exchange an operation costs a set insertion and
 * deletion instead of creating and clearing a timer, which matters at tens of thousands per second.
 */
export class DeadlineGroup {
  readonly #granularity: number;
  readonly #pending = new Set<{ deadline: number; expire: () => void }>();
  #timer: NodeJS.Timeout | undefined;

  /** @param granularity how often to check, in ms (the maximum lateness of a timeout). */
  constructor(granularity: number) {
    this.#granularity = Math.max(1, Math.floor(granularity));
  }

  /**
   * Settles like `promise`, or rejects with `onTimeout()` once `ms` have passed (give or take the
   * granularity).
   */
  run<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry = { deadline: performance.now() + ms, expire: () => reject(onTimeout()) };
      this.#add(entry);
      promise.then(
        (value) => {
          this.#delete(entry);
          resolve(value);
        },
        (error: unknown) => {
          this.#delete(entry);
          reject(error);
        },
      );
    });
  }

  #add(entry: { deadline: number; expire: () => void }): void {
    this.#pending.add(entry);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#check(), this.#granularity);
      this.#timer.unref();
    }
  }

  #delete(entry: { deadline: number; expire: () => void }): void {
    this.#pending.delete(entry);
    if (this.#pending.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  #check(): void {
    const now = performance.now();
    for (const entry of this.#pending) {
      if (entry.deadline <= now) {
        this.#delete(entry);
        entry.expire();
      }
    }
  }
}
