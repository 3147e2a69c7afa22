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
 * A subclass supplies the routine as a method, so a held lock that is its own `ReleaseRunner`
 * costs one object and one bound function (the {@link ReleaseFunc}), not a wrapper and two
 * closures; and it says how it keeps its function (see {@link Releasable}).
 */
export abstract class ReleaseRunner {
  #outcome: Promise<ReleaseOutcome> | undefined;

  /** The {@link ReleaseFunc} handed to callers. */
  abstract readonly release: ReleaseFunc;

  /** The release itself; called once, by {@link run}. */
  abstract releaseRoutine(): Promise<ReleaseOutcome> | ReleaseOutcome;

  /**
   * True when {@link releaseRoutine} never throws or rejects: its promise is then handed on as it
   * is, without a reaction that turns a failure into "unknown". False by default.
   */
  get routineNeverFails(): boolean {
    return false;
  }

  /** True once the release has been started. */
  get started(): boolean {
    return this.#outcome !== undefined;
  }

  /** Starts the release if needed; resolves to what it found. */
  run(): Promise<ReleaseOutcome> {
    this.#outcome ??= runSafely(this);
    return this.#outcome;
  }

  /** A new {@link ReleaseFunc} that runs this release (every one made runs the same, once). */
  protected newReleaseFunc(): ReleaseFunc {
    const release = releaseAndForget.bind(this);
    // `[Symbol.asyncDispose]` comes from the prototype (see RELEASE_FUNC_PROTOTYPE): an own
    // property would cost every held lock a property array besides its bound function.
    Object.setPrototypeOf(release, RELEASE_FUNC_PROTOTYPE);
    return release as unknown as ReleaseFunc;
  }
}

/** A {@link ReleaseRunner} that makes its {@link ReleaseFunc} once, up front, and keeps it. */
export abstract class Releasable extends ReleaseRunner {
  readonly release: ReleaseFunc = this.newReleaseFunc();
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

function releaseAndForget(this: ReleaseRunner): Promise<void> {
  const outcome = this.run();
  // A release answered at once (a store in this process) needs no reaction to drop its outcome.
  return answeredAtOnce(outcome) ? DONE : outcome.then(toUndefined);
}

/**
 * The outcome of a routine that answered at once, as a settled promise: one per outcome, shared by
 * every such release (a settled promise never changes), so that release makes no promise.
 */
const ANSWERED: Readonly<Record<ReleaseOutcome, Promise<ReleaseOutcome>>> = {
  released: Promise.resolve("released"),
  expired: Promise.resolve("expired"),
  taken: Promise.resolve("taken"),
  "handed-off": Promise.resolve("handed-off"),
  unknown: Promise.resolve("unknown"),
};

/** What the {@link ReleaseFunc} of a release answered at once resolves to (shared, as above). */
const DONE: Promise<void> = Promise.resolve();

/** Whether `outcome` is one of {@link ANSWERED}'s: its routine answered at once. */
function answeredAtOnce(outcome: Promise<ReleaseOutcome>): boolean {
  return (
    outcome === ANSWERED.released ||
    outcome === ANSWERED.expired ||
    outcome === ANSWERED.taken ||
    outcome === ANSWERED["handed-off"] ||
    outcome === ANSWERED.unknown
  );
}

function toUndefined(): undefined {
  return undefined;
}

/** Runs `releasable`'s routine; a routine that throws or rejects reports `"unknown"`. */
function runSafely(releasable: ReleaseRunner): Promise<ReleaseOutcome> {
  let outcome: Promise<ReleaseOutcome> | ReleaseOutcome;
  try {
    outcome = releasable.releaseRoutine();
  } catch {
    return ANSWERED.unknown;
  }
  // A routine that answered at once (a store in this process) costs no promise, and one that never
  // fails no extra promise.
  // (`??`: should a routine ever answer something else, its release still resolves, never throws.)
  if (typeof outcome === "string") return ANSWERED[outcome] ?? Promise.resolve(outcome);
  return releasable.routineNeverFails ? outcome : outcome.then(undefined, toUnknown);
}

const UNKNOWN: ReleaseOutcome = "unknown";

/**
 * What a release that failed, or got no answer, reports: it may or may not have happened. A
 * release never rejects: a lock that could not be deleted expires on its own.
 */
export function toUnknown(): ReleaseOutcome {
  return UNKNOWN;
}

/** The release returned by a `tryLock` that did not acquire: does nothing. */
export function noopRelease(): ReleaseFunc {
  return new ReleaseOnce(() => "released").release;
}
