/**
 * Settles like `promise`, unless one of `signals` aborts first: then rejects with that signal's
 * reason (and `promise` is left to settle on its own; the caller cleans up after it).
 * Listeners are removed however it ends.
 */
export function abortable<T>(promise: Promise<T>, signals: ReadonlyArray<AbortSignal | undefined>): Promise<T> {
  for (const signal of signals) {
    if (signal?.aborted) return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const unlisten = onAnyAbort(signals, reject);
    promise.then(
      (value) => {
        unlisten();
        resolve(value);
      },
      (error: unknown) => {
        unlisten();
        reject(error);
      },
    );
  });
}

/**
 * Calls `onAbort(reason)` once, when the first of `signals` aborts. Returns the function that
 * removes every listener it added (call it however the wait ends).
 */
export function onAnyAbort(
  signals: ReadonlyArray<AbortSignal | undefined>,
  onAbort: (reason: unknown) => void,
): () => void {
  const listeners: Array<[AbortSignal, () => void]> = [];
  const unlisten = (): void => {
    for (const [signal, listener] of listeners) signal.removeEventListener("abort", listener);
  };
  for (const signal of signals) {
    if (signal === undefined) continue;
    const listener = (): void => {
      unlisten();
      onAbort(signal.reason);
    };
    listeners.push([signal, listener]);
    signal.addEventListener("abort", listener, { once: true });
  }
  return unlisten;
}

/**
 * Lets many short operations be cut short by their owner's `close()` without adding an abort
 * listener to a shared signal for each one (which costs more than the operation's bookkeeping).
 */
export class CloseGate {
  readonly #pending = new Set<(reason: unknown) => void>();
  #closed = false;
  #reason: unknown;

  /** Rejects every pending race, and every later one, with `reason`. */
  close(reason: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#reason = reason;
    for (const reject of this.#pending) reject(reason);
    this.#pending.clear();
  }

  /** Settles like `promise`, unless `signal` aborts or the gate closes first. */
  race<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    if (this.#closed) return Promise.reject(this.#reason);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        done();
        reject(signal?.reason);
      };
      const done = (): void => {
        this.#pending.delete(reject);
        signal?.removeEventListener("abort", onAbort);
      };
      this.#pending.add(reject);
      signal?.addEventListener("abort", onAbort, { once: true });
      promise.then(
        (value) => {
          done();
          resolve(value);
        },
        (error: unknown) => {
          done();
          reject(error);
        },
      );
    });
  }
}
