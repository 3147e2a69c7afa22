import { onAnyAbort } from "./abortable.js";

/**
 * How a {@link Waiter.wait} ended when it did not reject: notified (try now), timed out (try as a
 * safety net), or postponed (nothing to try yet; wait again with a fresh timeout).
 */
export type WaitOutcome = "notified" | "timeout" | "postponed";

/**
 * One caller waiting for a key. A notification that arrives while the caller is busy (say, in the
 * middle of an attempt) is remembered, so the next `wait` returns at once: no wake-up is lost.
 */
export class Waiter {
  #pending = false;
  #wake: ((outcome: WaitOutcome) => void) | undefined;

  /** Ends the current wait, or the next one if the caller is not waiting right now. */
  notify(): void {
    this.#pending = true;
    this.#wake?.("notified");
  }

  /** Ends the current wait (if any) so it restarts with a fresh timeout; not remembered. */
  postpone(): void {
    this.#wake?.("postponed");
  }

  /**
   * Waits for a notification, `timeoutMs` (if given), or the abort of any of `signals`, whichever
   * comes first; an abort rejects with that signal's reason. Leaves no timer or listener behind.
   */
  wait(timeoutMs: number | undefined, signals: ReadonlyArray<AbortSignal | undefined>): Promise<WaitOutcome> {
    for (const signal of signals) {
      if (signal?.aborted) return Promise.reject(signal.reason);
    }
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve("notified");
    }
    return new Promise<WaitOutcome>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const finish = (): void => {
        this.#wake = undefined;
        if (timer !== undefined) clearTimeout(timer);
        unlisten();
      };
      const unlisten = onAnyAbort(signals, (reason) => {
        finish();
        reject(reason);
      });
      this.#wake = (outcome) => {
        finish();
        if (outcome === "notified") this.#pending = false;
        resolve(outcome);
      };
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          finish();
          resolve("timeout");
        }, timeoutMs);
        timer.unref();
      }
    });
  }
}

/**
 * First-in, first-out queues of {@link Waiter}s per key. Only the head of a key's queue is woken
 * by a release, so waiters in one process are served in arrival order and one release costs one
 * retry, not a thundering herd. Empty queues are deleted, so the map does not grow.
 */
export class WaitQueues {
  readonly #queues = new Map<string, Set<Waiter>>();

  /** Appends `waiter` to `key`'s queue. */
  enqueue(key: string, waiter: Waiter): void {
    let queue = this.#queues.get(key);
    if (queue === undefined) {
      queue = new Set();
      this.#queues.set(key, queue);
    }
    queue.add(waiter);
  }

  /**
   * Removes `waiter` from `key`'s queue. When it was the head and `passOn` is set (it leaves
   * without having used its turn: aborted, closed), the new head is notified so that a wake-up
   * meant for the leaver is not lost.
   */
  remove(key: string, waiter: Waiter, passOn: boolean): void {
    const queue = this.#queues.get(key);
    if (queue === undefined) return;
    const wasHead = firstOf(queue) === waiter;
    if (!queue.delete(waiter)) return;
    if (queue.size === 0) this.#queues.delete(key);
    else if (wasHead && passOn) firstOf(queue)?.notify();
  }

  /** True when `waiter` is first in `key`'s queue. */
  isHead(key: string, waiter: Waiter): boolean {
    const queue = this.#queues.get(key);
    return queue !== undefined && firstOf(queue) === waiter;
  }

  /** Number of waiters queued for `key`. */
  size(key: string): number {
    return this.#queues.get(key)?.size ?? 0;
  }

  /** Wakes the head of `key`'s queue, if any. */
  notifyHead(key: string): void {
    const queue = this.#queues.get(key);
    if (queue !== undefined) firstOf(queue)?.notify();
  }

  /** Restarts the head's wait of `key`'s queue with a fresh timeout, if it is waiting. */
  postponeHead(key: string): void {
    const queue = this.#queues.get(key);
    if (queue !== undefined) firstOf(queue)?.postpone();
  }

  /** Wakes the head of every queue (after notifications may have been lost). */
  notifyAllHeads(): void {
    for (const queue of this.#queues.values()) firstOf(queue)?.notify();
  }
}

function firstOf<T>(set: Set<T>): T | undefined {
  for (const item of set) return item;
  return undefined;
}
