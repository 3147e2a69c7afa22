/**
 * Operations a locker leaves running in the background (deletes of what an attempt may have left,
 * deletes retried until confirmed): a failure of one is ignored, and the locker's close waits for
 * all of them.
 */
export class BackgroundWork {
  readonly #running = new Set<Promise<unknown>>();

  /** Keeps `operation` until it settles (its failure ignored): {@link drained} waits for it. */
  track(operation: Promise<unknown>): void {
    const tracked = operation.catch(() => undefined).finally(() => this.#running.delete(tracked));
    this.#running.add(tracked);
  }

  /** Resolves once nothing tracked runs, operations tracked while it waits included. */
  async drained(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running);
  }
}
