/**
 * Counts operations in flight, so that a close (or a stop) can wait until the last one has
 * settled; an operation's failure is left to whoever awaits it (tracking it handles it, so an
 * operation nobody awaits fails quietly). A count, not a set of promises: tracking an operation
 * allocates nothing.
 */
export class InFlight {
  #count = 0;
  /** What {@link drained} answers while operations are in flight (made on first wait). */
  #drained: Promise<void> | undefined;
  #resolveDrained: (() => void) | undefined;

  /** Number of operations in flight. */
  get count(): number {
    return this.#count;
  }

  /** Counts `operation` until it settles; returns it. */
  track<T>(operation: Promise<T>): Promise<T> {
    this.#count += 1;
    operation.then(this.#settled, this.#settled);
    return operation;
  }

  /**
   * Counts one operation from now until {@link end}: for a caller that already reacts to the
   * operation settling and calls `end` there, which saves the reaction {@link track} adds.
   */
  begin(): void {
    this.#count += 1;
  }

  /** Counts an operation counted by {@link begin} as settled. */
  end(): void {
    this.#settled();
  }

  /** Resolves once no operation is in flight, operations counted while it waits included. */
  drained(): Promise<void> {
    if (this.#count === 0) return Promise.resolve();
    this.#drained ??= new Promise<void>((resolve) => {
      this.#resolveDrained = resolve;
    });
    return this.#drained;
  }

  /** Counts an operation as settled (one function for all of them). */
  readonly #settled = (): void => {
    this.#count -= 1;
    if (this.#count === 0 && this.#resolveDrained !== undefined) {
      const resolve = this.#resolveDrained;
      this.#drained = undefined;
      this.#resolveDrained = undefined;
      resolve();
    }
  };
}
