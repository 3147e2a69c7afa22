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
