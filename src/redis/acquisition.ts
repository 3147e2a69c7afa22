import type { DiagnosticSource } from "../internal/diagnostics.js";
import type { IntrusiveList, Linked } from "../internal/intrusive-list.js";
import { Releasable } from "../internal/release-func.js";
import type { ReleaseOutcome } from "../locker.js";
import type { LockHandle } from "./lock-store.js";

/** Lifecycle of one acquisition: held until released, or lost on the way. */
export type AcquisitionState = "held" | "lost" | "released";

/**
 * Who releases an {@link Acquisition} (its engine), on behalf of which public locker (one object
 * per locker: a read-write locker's two views share an engine, not an owner).
 */
export interface AcquisitionOwner extends DiagnosticSource {
  releaseAcquisition(acquisition: Acquisition): Promise<ReleaseOutcome>;
}

/**
 * One successful acquisition of a key: the unit the locker tracks (per token, never per key),
 * extends, reports as lost, and releases. It carries its own links into the lease keeper's
 * schedule, so keeping it costs no entry in a shared Set or Map.
 */
export class Acquisition extends Releasable implements Linked<Acquisition> {
  state: AcquisitionState = "held";
  /** Created on first use (most acquisitions never need one): aborted when the lock is lost. */
  #lost: AbortController | undefined;
  /** Why the lock was lost, once it was. */
  #lostReason: Error | undefined;
  /**
   * How the lease keeper keeps it: extended while held (`"always"`), extended once to its full
   * lease and then left to expire (`"once"`: a hand-off grant with `autoExtend: false`, whose TTL
   * is the short grace), or never (`"never"`: left to expire).
   */
  keepAlive: "always" | "once" | "never" = "always";
  /** When the lease keeper next acts on it (monotonic ms): extend, or retry an extension. */
  due = 0;
  /** Links of the lease keeper's schedule (see {@link IntrusiveList}). */
  prev: Acquisition | undefined;
  next: Acquisition | undefined;
  list: IntrusiveList<Acquisition> | undefined;
  /** `performance.now()` at the grant, taken only while anyone listens for releases. */
  grantedAt: number | undefined;

  constructor(
    readonly owner: AcquisitionOwner,
    /** The caller's key (no prefix). */
    readonly key: string,
    readonly handle: LockHandle,
    /** The lease length this acquisition is extended by, in ms. */
    readonly duration: number,
    /**
     * The fencing token issued with this grant, when asked for (set once, before the caller sees
     * the acquisition, when it arrives after the grant).
     */
    public fencingToken: bigint | undefined,
  ) {
    super();
  }

  /** Its own {@link Releasable} (kept as a name the locker's code reads well with). */
  get releaser(): Releasable {
    return this;
  }

  releaseRoutine(): Promise<ReleaseOutcome> {
    return this.owner.releaseAcquisition(this);
  }

  /** Aborts with a LockLostError when the lock is found lost (see {@link markLost}). */
  get lostSignal(): AbortSignal {
    this.#lost ??= new AbortController();
    if (this.#lostReason !== undefined && !this.#lost.signal.aborted) this.#lost.abort(this.#lostReason);
    return this.#lost.signal;
  }

  /** Records the loss and aborts the signal if anyone has it. */
  markLost(reason: Error): void {
    this.state = "lost";
    this.#lostReason = reason;
    this.#lost?.abort(reason);
  }
}
