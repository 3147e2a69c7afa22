/**
 * Exponential backoff with jitter, bounded by `max`: the safety net of a wait that normally ends
 * on a release notification. Each delay is drawn uniformly from [d/2, d] where d doubles from
 * `min` up to `max`, so waiters that started together drift apart.
 */
export class Backoff {
  readonly #min: number;
  readonly #max: number;
  #attempt = 0;

  constructor(min: number, max: number) {
    this.#min = min;
    this.#max = Math.max(min, max);
  }

  /** The next delay in milliseconds. */
  next(): number {
    const ceiling = Math.min(this.#max, this.#min * 2 ** this.#attempt);
    if (ceiling < this.#max) this.#attempt += 1;
    return Math.max(1, Math.round(ceiling / 2 + Math.random() * (ceiling / 2)));
  }
}
