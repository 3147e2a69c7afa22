/**
 * A lock in the shape of Gitea's in-memory locker, as a baseline: try to take the key; if it is
 * held, sleep a fixed 100 ms tick and try again. There is no queue and no wake-up on release, so a
 * waiter notices a release only at its next tick, and a holder that re-locks at once keeps
 * winning. Written for this benchmark only.
 */
import { sleep } from "./timing.mjs";

/** Poll interval of a blocked lock (ms), as in Gitea. */
export const TICK_MS = 100;

export class SpinLocker {
  /** Current holder's token per held key. */
  #held = new Map();

  /**
   * Takes `key` now if it is free.
   * @param {string} key
   * @returns {(() => void) | undefined} the release function, or undefined when the key is held
   */
  tryLock(key) {
    if (this.#held.has(key)) return undefined;
    const token = Symbol(key);
    this.#held.set(key, token);
    return () => {
      if (this.#held.get(key) === token) this.#held.delete(key);
    };
  }

  /**
   * Waits until `key` is taken: one try, then one try per {@link TICK_MS} tick.
   * @param {string} key
   * @returns {Promise<() => void>}
   */
  async lock(key) {
    for (;;) {
      const release = this.tryLock(key);
      if (release !== undefined) return release;
      await sleep(TICK_MS);
    }
  }
}
