import type { ReleaseFunc, ReleaseOutcome } from "../locker.js";

/**
 * The prototype of every {@link ReleaseFunc}: `Function.prototype` plus a `[Symbol.asyncDispose]`
 * getter that returns the function itself, so `release[Symbol.asyncDispose] === release` (as an own
 * property would have it) and `await using release = …` calls it.
 */
const RELEASE_FUNC_PROTOTYPE: object = Object.create(Function.prototype, {
  [Symbol.asyncDispose]: {
    get(this: unknown) {
      return this;
    },
    configurable: true,
  },
});

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
    // `[Symbol.asyncDispose]` comes from the prototype (see RELEASE_FUNC_PROTOTYPE): an own
    // property would cost every held lock a property array besides its bound function.
    Object.setPrototypeOf(release, RELEASE_FUNC_PROTOTYPE);
    this.release = release as unknown as ReleaseFunc;
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

/** Runs `releasable`'s routine; a routine that throws or rejects reports `"unknown"`. */
function runSafely(releasable: Releasable): Promise<ReleaseOutcome> {
  let outcome: Promise<ReleaseOutcome> | ReleaseOutcome;
  try {
    outcome = releasable.releaseRoutine();
  } catch {
    return Promise.resolve(UNKNOWN);
  }
  // A routine that answered at once (a store in this process) costs no extra promise.
  return typeof outcome === "string" ? Promise.resolve(outcome) : outcome.then(undefined, toUnknown);
}

const UNKNOWN: ReleaseOutcome = "unknown";

/** A release never rejects: a lock that could not be deleted expires on its own. */
function toUnknown(): ReleaseOutcome {
  return UNKNOWN;
}

/** The release returned by a `tryLock` that did not acquire: does nothing. */
export function noopRelease(): ReleaseFunc {
  return new ReleaseOnce(() => "released").release;
}
