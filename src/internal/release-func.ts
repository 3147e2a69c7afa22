import type { ReleaseFunc, ReleaseOutcome } from "../locker.js";

/**
 * Runs a release routine at most once (started synchronously on the first call) and remembers
 * what it found. Never rejects: a routine that throws reports `"unknown"`.
 */
export class ReleaseOnce {
  readonly #routine: () => Promise<ReleaseOutcome> | ReleaseOutcome;
  #outcome: Promise<ReleaseOutcome> | undefined;
  /** The {@link ReleaseFunc} handed to callers. */
  readonly release: ReleaseFunc;

  constructor(routine: () => Promise<ReleaseOutcome> | ReleaseOutcome) {
    this.#routine = routine;
    const release = (): Promise<void> => this.run().then(() => undefined);
    this.release = Object.assign(release, { [Symbol.asyncDispose]: release });
  }

  /** True once the release has been started. */
  get started(): boolean {
    return this.#outcome !== undefined;
  }

  /** Starts the release if needed; resolves to what it found. */
  run(): Promise<ReleaseOutcome> {
    this.#outcome ??= runSafely(this.#routine);
    return this.#outcome;
  }
}

async function runSafely(routine: () => Promise<ReleaseOutcome> | ReleaseOutcome): Promise<ReleaseOutcome> {
  try {
    return await routine();
  } catch {
    // A release never rejects: a lock that could not be deleted expires on its own.
    return "unknown";
  }
}

/** The release returned by a `tryLock` that did not acquire: does nothing. */
export function noopRelease(): ReleaseFunc {
  return new ReleaseOnce(() => "released").release;
}
