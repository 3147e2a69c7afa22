import { performance } from "node:perf_hooks";
import { LockLostError } from "../errors.js";
import type { Lease, ReleaseFunc, ReleaseOutcome } from "../locker.js";
import type { ReleaseRunner } from "./release-func.js";

/**
 * The acquisition behind a {@link LeaseImpl}, as the lease sees it (the locker's `Acquisition`:
 * the lease keeps it, not a copy of its parts or closures over it).
 */
export interface LeaseSource {
  readonly key: string;
  readonly releaser: ReleaseRunner;
  /** Aborted (with a LockLostError) when the locker finds the lock lost; made when first read. */
  readonly lostSignal: AbortSignal;
  /** `performance.now()` past which the lock may have expired (Infinity: never expires). */
  readonly validUntil: number;
  readonly fencingToken: bigint | undefined;
  /** Called when `assertHeld` finds the deadline passed before the locker's timer noticed. */
  deadlinePassed(): void;
  /** Hands the lease, `weight` permits as the store counts them, off (see `Lease.handOff`). */
  handOff(weight: number): Promise<string>;
  /** True once the lease was handed off. */
  readonly handedOff: boolean;
}

/**
 * The {@link Lease} every locker returns from `acquire`. Its `lost` signal is made when first read
 * (most leases are released without anyone listening for a loss).
 */
export class LeaseImpl implements Lease {
  readonly #source: LeaseSource;
  /** Permits it holds as the store counts them (1 for a lock): what a hand-off hands on. */
  readonly #weight: number;
  readonly key: string;
  readonly release: ReleaseFunc;
  readonly fencingToken?: bigint;

  constructor(source: LeaseSource, weight: number) {
    this.#source = source;
    this.#weight = weight;
    this.key = source.key;
    this.release = source.releaser.release;
    if (source.fencingToken !== undefined) this.fencingToken = source.fencingToken;
  }

  get lost(): AbortSignal {
    return this.#source.lostSignal;
  }

  assertHeld(): void {
    const lost = this.lost;
    if (lost.aborted) throw lost.reason;
    if (this.#source.handedOff) throw new LockLostError(this.key, "handed-off");
    if (this.#source.releaser.started) throw new LockLostError(this.key, "released");
    if (performance.now() >= this.#source.validUntil) {
      this.#source.deadlinePassed();
      throw lost.aborted ? lost.reason : new LockLostError(this.key, "expired");
    }
  }

  handOff(): Promise<string> {
    return this.#source.handOff(this.#weight);
  }

  releaseWithOutcome(): Promise<ReleaseOutcome> {
    return this.#source.releaser.run();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}
