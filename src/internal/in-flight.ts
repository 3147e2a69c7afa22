/**
 * Counts operations in flight, so that a close (or a stop) can wait until the last one has
 * settled. A count, not a set of promises: tracking an operation allocates nothing.
 */
export class InFlight {
  #count = 0;
  /** Resolves the wait of {@link drained} once the count is back to zero. */
  #drained: (() => void) | undefined;

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

  /** Resolves once no operation is in flight (call it while {@link count} is above zero). */
  drained(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#drained = resolve;
    });
  }

  /** Counts an operation as settled (one function for all of them). */
  readonly #settled = (): void => {
    this.#count -= 1;
    if (this.#count === 0) this.#drained?.();
  };
}
