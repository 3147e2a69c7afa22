import { performance } from "node:perf_hooks";
import { InvalidArgumentError, LockLostError } from "../errors.js";
import { type DiagnosticSource, grantTime, publishLost, publishRelease } from "../internal/diagnostics.js";
import { LeaseImpl } from "../internal/lease.js";
import { Releasable } from "../internal/release-func.js";
import { checkWeight, resolveAcquireOptions, validateTimerDelay } from "../internal/validate.js";
import type { Lease, ReleaseOutcome } from "../locker.js";

/**
 * What the in-memory lockers make of {@link AcquireOptions}: the weight (checked against the
 * locker's limit), whether to fence, and `expiry` only when the grant expires (`autoExtend: false`).
 */
export interface MemoryAcquireOptions {
  readonly fencing: boolean;
  readonly weight: number;
  /** Ms after the grant at which it is freed, or `undefined`: held until released. */
  readonly expiry: number | undefined;
}

/** A memory grant that is never extended needs a length: there is no locker-wide expiry. */
const NO_DEFAULT_EXPIRY =
  "a lease length in ms with autoExtend: false (a memory lock is held by its process and has no default expiry)";

/**
 * Validates `options` for an in-memory locker whose acquisitions take at most `limit` permits.
 * `expiry` without `autoExtend: false` is accepted and ignored: an in-memory grant is held by its
 * process and never expires while it is (conceptually) extended. `autoExtend: false` requires an
 * `expiry`, and that expiry must be a delay a Node.js timer honours.
 */
export function resolveMemoryAcquireOptions(options: unknown, limit: number, what: string): MemoryAcquireOptions {
  const { fencing, weight, autoExtend, expiry } = resolveAcquireOptions(options);
  checkWeight(weight, limit, what);
  if (autoExtend) return weight === 1 && !fencing ? PLAIN : { fencing, weight, expiry: undefined };
  if (expiry === undefined) throw new InvalidArgumentError("options.expiry", NO_DEFAULT_EXPIRY, expiry);
  validateTimerDelay("options.expiry", expiry);
  return { fencing, weight, expiry };
}

/** The resolved options of a call that passed none (shared, like `DEFAULT_ACQUIRE_OPTIONS`). */
const PLAIN: MemoryAcquireOptions = Object.freeze({ fencing: false, weight: 1, expiry: undefined });

/** A memory grant held until released never expires, so its lease's `lost` signal never aborts. */
const NEVER_LOST = new AbortController().signal;
const never = (): number => Number.POSITIVE_INFINITY;
const nothing = (): undefined => undefined;

/**
 * The release of a memory grant held until released: frees it once (`free` must leave a later
 * holder alone) and publishes what it found while anyone listens (with the hold time when someone
 * listened at the grant too).
 */
export class HeldRelease extends Releasable {
  readonly #source: DiagnosticSource;
  readonly #key: string;
  readonly #free: () => ReleaseOutcome;
  readonly #grantedAt = grantTime();

  constructor(source: DiagnosticSource, key: string, free: () => ReleaseOutcome) {
    super();
    this.#source = source;
    this.#key = key;
    this.#free = free;
  }

  releaseRoutine(): ReleaseOutcome {
    return publishRelease(this.#source, this.#key, this.#grantedAt, this.#free());
  }
}

/**
 * A memory grant with `autoExtend: false`: freed by its holder's release or, at the latest,
 * `expiry` ms after the grant by an unref'ed timer, whichever comes first. At expiry the grant is
 * freed in the store (so the next waiter is granted) and `lost` aborts with a
 * `LockLostError(key, "expired")` (published as an expected loss); a release afterwards reports
 * `"expired"` and touches nothing.
 */
class ExpiringHold extends Releasable {
  readonly #source: DiagnosticSource;
  readonly #key: string;
  readonly #free: () => ReleaseOutcome;
  /** When it was granted, if anyone listened for releases then. */
  readonly #grantedAt = grantTime();
  readonly #lost = new AbortController();
  readonly #timer: NodeJS.Timeout;
  /** `performance.now()` at which the grant expires. */
  readonly deadline: number;
  #ended = false;

  constructor(source: DiagnosticSource, key: string, expiry: number, free: () => ReleaseOutcome) {
    super();
    this.#source = source;
    this.#key = key;
    this.#free = free;
    this.deadline = performance.now() + expiry;
    this.#timer = setTimeout(() => this.expire(), expiry);
    this.#timer.unref();
  }

  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** Frees the grant and reports it lost, unless it already ended (released or expired). */
  expire(): void {
    if (this.#end()) return;
    this.#free();
    const error = new LockLostError(this.#key, "expired");
    this.#lost.abort(error);
    publishLost(this.#source, error, true);
  }

  releaseRoutine(): ReleaseOutcome {
    // Past the deadline, a timer delayed by a busy event loop has not fired yet: it is expired all the same.
    if (performance.now() >= this.deadline) this.expire();
    const outcome = this.#end() ? "expired" : this.#free();
    return publishRelease(this.#source, this.#key, this.#grantedAt, outcome);
  }

  /** Marks the grant ended and stops its timer; returns whether it had already ended. */
  #end(): boolean {
    const ended = this.#ended;
    this.#ended = true;
    clearTimeout(this.#timer);
    return ended;
  }
}

/**
 * The {@link Lease} of an in-memory grant of `source` (the locker, for diagnostics): `free` gives
 * the grant back to its store (once; it must leave a later holder alone). With `expiry`, the grant
 * is freed at expiry unless released first (see {@link ExpiringHold}); without, it is held until
 * released and never reported lost.
 */
export function memoryLease(
  source: DiagnosticSource,
  key: string,
  free: () => ReleaseOutcome,
  expiry: number | undefined,
  fencingToken: bigint | undefined,
): Lease {
  if (expiry === undefined) return heldLease(key, new HeldRelease(source, key, free), fencingToken);
  const hold = new ExpiringHold(source, key, expiry, free);
  return new LeaseImpl({
    key,
    releaser: hold,
    lost: hold.lost,
    validUntil: () => hold.deadline,
    onDeadlinePassed: () => hold.expire(),
    fencingToken,
  });
}

/** The lease of a memory grant held until `releaser` runs. */
function heldLease(key: string, releaser: Releasable, fencingToken: bigint | undefined): Lease {
  return new LeaseImpl({
    key,
    releaser,
    lost: NEVER_LOST,
    validUntil: never,
    onDeadlinePassed: nothing,
    fencingToken,
  });
}
