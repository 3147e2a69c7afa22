import type { FileStore } from "./store.js";

/**
 * Queue tickets leaving keys' queues, per key hash (the file backends' waiters leave by renaming
 * their ticket out): the next attempt on a key here reads the queue once they are gone (else it
 * would find its own old ticket ahead), and the store's `close()` waits for them.
 */
export class Departures {
  readonly #store: FileStore;
  readonly #leaving = new Map<string, Promise<void>>();

  constructor(store: FileStore) {
    this.#store = store;
  }

  /** Settles once the tickets leaving `hash`'s queue now are gone (`undefined`: none is leaving). */
  of(hash: string): Promise<void> | undefined {
    return this.#leaving.get(hash);
  }

  /** Tracks `leaving`, a ticket leaving `hash`'s queue; settles (never rejects) once it and those before it are gone. */
  track(hash: string, leaving: Promise<void>): Promise<void> {
    const all = Promise.all([this.#leaving.get(hash), leaving.catch(() => undefined)]).then(() => {
      if (this.#leaving.get(hash) === all) this.#leaving.delete(hash);
    });
    this.#leaving.set(hash, all);
    this.#store.tidy(all);
    return all;
  }
}
