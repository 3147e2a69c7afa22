/**
 * A schema object (a sequence, a table) created at most once per locker: the first `ensure` runs
 * `create`, later ones share its promise; a failed creation is forgotten, so the next call tries
 * again.
 */
export class CreateOnce {
  #ready: Promise<void> | undefined;

  /** Resolves once `create` has succeeded (now or earlier); rejects with its error otherwise. */
  ensure(create: () => Promise<unknown>): Promise<void> {
    this.#ready ??= create().then(
      () => undefined,
      (error: unknown) => {
        this.#ready = undefined;
        throw error;
      },
    );
    return this.#ready;
  }

  /** Forgets a creation that succeeded (the object was found missing since): the next `ensure` creates it again. */
  forget(): void {
    this.#ready = undefined;
  }
}
