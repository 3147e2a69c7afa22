/** How many keys' split votes in a row a quorum keeps count of (past that it starts afresh). */
const SPLITS_KEPT = 256;

/**
 * The keys whose latest attempts on a quorum split the vote (some nodes voted for the attempt,
 * too few), with how many did in a row: how long the next attempt waits (see {@link retryDelay}).
 */
export class SplitVotes {
  readonly #inARow = new Map<string, number>();

  /**
   * Counts another split vote of `resource` in a row; answers how long its contender waits
   * before trying again (ms): 1 ms plus a random time up to twice what the attempt took
   * (`attemptMs`: its vote and the undo of its minority), doubled for each split of the key in a
   * row before it. At once, the contenders would split again, in lock-step; spread over a couple
   * of attempts' time, the first to try usually wins before the next tries. The doubling bounds
   * the tries where the split lasts: minorities left by contenders that crashed stay until their
   * lease runs out. (The wait loop never waits longer than its backoff.)
   */
  retryDelay(resource: string, attemptMs: number): number {
    if (this.#inARow.size >= SPLITS_KEPT && !this.#inARow.has(resource)) this.#inARow.clear();
    const inARow = (this.#inARow.get(resource) ?? 0) + 1;
    this.#inARow.set(resource, inARow);
    return 1 + Math.random() * 2 * attemptMs * 2 ** Math.min(inARow - 1, 16);
  }

  /** An attempt on `resource` ended other than in a split vote. */
  ended(resource: string): void {
    if (this.#inARow.size !== 0) this.#inARow.delete(resource);
  }
}
