import type { ReleaseFunc, ReleaseOutcome } from "../locker.js";

/**
 * Runs a release routine at most once (started synchronously on the first call) and remembers
 * what it found. Never rejects: a routine that throws reports `"unknown"`.
 *
 * A subclass supplies the routine as a method, so a held lock that is its own `Releasable` costs
 * one object and one bound function (the {@link ReleaseFunc}), not a wrapper and two closures.
 */
export abstract class Releasable {
  #outcome: Promise<ReleaseOutcome> | undefined;
  /** The {@link ReleaseFunc} handed to callers. */
  readonly release: ReleaseFunc;

  constructor() {
    const release = releaseAndForget.bind(this);
    (release as unknown as Record<symbol, unknown>)[Symbol.asyncDispose] = release;
    this.release = release as ReleaseFunc;
  }

  /** The release itself; called once, by {@link run}. */
  abstract releaseRoutine(): Promise<ReleaseOutcome> | ReleaseOutcome;

  /** True once the release has been started. */
  get started(): boolean {
    return this.#outcome !== undefined;
  }

  /** Starts the release if needed; resolves to what it found. */
  run(): Promise<ReleaseOutcome> {
    this.#outcome ??= runSafely(this);
    return this.#outcome;
  }
}

/** A {@link Releasable} whose routine is a function. */
export class ReleaseOnce extends Releasable {
  readonly #routine: () => Promise<ReleaseOutcome> | ReleaseOutcome;

  constructor(routine: () => Promise<ReleaseOutcome> | ReleaseOutcome) {
    super();
    this.#routine = routine;
  }

  releaseRoutine(): Promise<ReleaseOutcome> | ReleaseOutcome {
    return this.#routine();
  }
}

function releaseAndForget(this: Releasable): Promise<void> {
  return this.run().then(toUndefined);
}

function toUndefined(): undefined {
  return undefined;
}

async function runSafely(releasable: Releasable): Promise<ReleaseOutcome> {
  try {
    return await releasable.releaseRoutine();
  } catch {
    // A release never rejects: a lock that could not be deleted expires on its own.
    return "unknown";
  }
}

/** The release returned by a `tryLock` that did not acquire: does nothing. */
export function noopRelease(): ReleaseFunc {
  return new ReleaseOnce(() => "released").release;
}
