import { performance } from "node:perf_hooks";
import { LockLostError } from "../errors.js";
import type { Lease, ReleaseFunc, ReleaseOutcome } from "../locker.js";
import type { ReleaseRunner } from "./release-func.js";

/** What a locker tells a {@link LeaseImpl} about the acquisition behind it. */
export interface LeaseSource {
  readonly key: string;
  readonly releaser: ReleaseRunner;
  /** Aborted (with a LockLostError) when the locker finds the lock lost. */
  readonly lost: AbortSignal;
  /** `performance.now()` past which the lock may have expired (Infinity: never expires). */
  validUntil(): number;
  /** Called when `assertHeld` finds the deadline passed before the locker's timer noticed. */
  onDeadlinePassed(): void;
  readonly fencingToken: bigint | undefined;
  /** Hands the lease off (see `Lease.handOff`). */
  handOff(): Promise<string>;
  /** True once the lease was handed off. */
  handedOff(): boolean;
}

/** The {@link Lease} every locker returns from `acquire`. */
export class LeaseImpl implements Lease {
  readonly #source: LeaseSource;
  readonly key: string;
  readonly release: ReleaseFunc;
  readonly lost: AbortSignal;
  readonly fencingToken?: bigint;

  constructor(source: LeaseSource) {
    this.#source = source;
    this.key = source.key;
    this.release = source.releaser.release;
    this.lost = source.lost;
    if (source.fencingToken !== undefined) this.fencingToken = source.fencingToken;
  }

  assertHeld(): void {
    if (this.lost.aborted) throw this.lost.reason;
    if (this.#source.handedOff()) throw new LockLostError(this.key, "handed-off");
    if (this.#source.releaser.started) throw new LockLostError(this.key, "released");
    if (performance.now() >= this.#source.validUntil()) {
      this.#source.onDeadlinePassed();
      throw this.lost.aborted ? this.lost.reason : new LockLostError(this.key, "expired");
    }
  }

  handOff(): Promise<string> {
    return this.#source.handOff();
  }

  releaseWithOutcome(): Promise<ReleaseOutcome> {
    return this.#source.releaser.run();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}
