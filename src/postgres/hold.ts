import { performance } from "node:perf_hooks";
import { LockLostError } from "../errors.js";
import { type DiagnosticSource, grantTime, publishLost, publishRelease } from "../internal/diagnostics.js";
import { LeaseImpl } from "../internal/lease.js";
import { Releasable } from "../internal/release-func.js";
import type { Lease, ReleaseOutcome } from "../locker.js";
import type { Session } from "./session.js";

/** What one acquisition asks for. */
export interface Request {
  readonly fencing: boolean;
  readonly autoExtend: boolean;
  /** Lease length in ms. */
  readonly expiry: number;
}

/** What a {@link Hold} may ask of its locker. */
export interface HoldOwner {
  /** Forgets the hold and unlocks it in PostgreSQL; resolves to what the unlock found. */
  free(hold: Hold): Promise<ReleaseOutcome>;
  /** Forgets the hold (its lock is gone already). */
  untrack(hold: Hold): void;
  /** Calls `onLockLost`. */
  reportLost(error: LockLostError): void;
  /** When a lease of `length` ms on `session` stops being confirmed. */
  validUntil(session: Session, length: number): number;
  /** The locker in diagnostics messages. */
  readonly diagnostics: DiagnosticSource;
}

/**
 * One held acquisition of a `PostgresLocker`: its release (once), its `lost` signal, and with
 * `autoExtend: false` the timer that frees it at expiry. Publishes its release and its loss while
 * anyone listens (see `diagnostics.ts`).
 */
export class Hold extends Releasable {
  readonly #locker: HoldOwner;
  readonly session: Session;
  readonly key: string;
  readonly resource: string;
  readonly request: Request;
  readonly fencingToken: bigint | undefined;
  readonly #lost = new AbortController();
  readonly #grantedAt = performance.now();
  /** When it was granted, if anyone listened for releases then (for the release's hold time). */
  readonly #observedAt = grantTime();
  #timer: NodeJS.Timeout | undefined;
  #ended = false;
  /** Released by the locker for a caller that never got it: publishes no release message. */
  #abandoned = false;

  constructor(
    locker: HoldOwner,
    session: Session,
    key: string,
    resource: string,
    request: Request,
    fencingToken: bigint | undefined,
  ) {
    super();
    this.#locker = locker;
    this.session = session;
    this.key = key;
    this.resource = resource;
    this.request = request;
    this.fencingToken = fencingToken;
    if (!request.autoExtend) {
      this.#timer = setTimeout(() => this.expire(), request.expiry);
      this.#timer.unref();
    }
  }

  /** The {@link Lease} of this acquisition. */
  lease(): Lease {
    return new LeaseImpl({
      key: this.key,
      releaser: this,
      lost: this.#lost.signal,
      validUntil: () => this.#validUntil(),
      onDeadlinePassed: () => {
        if (!this.request.autoExtend) this.expire();
      },
      fencingToken: this.fencingToken,
    });
  }

  #validUntil(): number {
    const confirmed = this.#locker.validUntil(this.session, this.request.expiry);
    return this.request.autoExtend ? confirmed : Math.min(confirmed, this.#grantedAt + this.request.expiry);
  }

  /** `autoExtend: false` at expiry: frees the lock so the next waiter gets it, and reports it lost (expected). */
  expire(): void {
    if (this.#end()) return;
    void this.#locker.free(this);
    const error = new LockLostError(this.key, "expired");
    this.#lost.abort(error);
    publishLost(this.#locker.diagnostics, error, true);
  }

  /** The lock is gone with its session: reports it lost (not expected). */
  lose(error: LockLostError): void {
    if (this.#end()) return;
    this.#locker.untrack(this);
    this.#lost.abort(error);
    publishLost(this.#locker.diagnostics, error, false);
    this.#locker.reportLost(error);
  }

  /**
   * Releases a hold whose caller never received it (its call was aborted or the locker closed
   * while the attempt was in flight): like `release`, without a release message.
   */
  abandon(): Promise<void> {
    this.#abandoned = true;
    return this.release();
  }

  async releaseRoutine(): Promise<ReleaseOutcome> {
    const outcome = await this.#release();
    if (this.#abandoned) return outcome;
    return publishRelease(this.#locker.diagnostics, this.key, this.#observedAt, outcome);
  }

  #release(): Promise<ReleaseOutcome> | ReleaseOutcome {
    if (!this.request.autoExtend && performance.now() >= this.#grantedAt + this.request.expiry) this.expire();
    if (this.#end()) return "expired";
    return this.#locker.free(this);
  }

  /** Marks the hold ended and stops its timer; returns whether it had already ended. */
  #end(): boolean {
    const ended = this.#ended;
    this.#ended = true;
    clearTimeout(this.#timer);
    return ended;
  }
}
