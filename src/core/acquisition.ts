import type { DiagnosticSource } from "../internal/diagnostics.js";
import type { IntrusiveList, Linked } from "../internal/intrusive-list.js";
import { Releasable } from "../internal/release-func.js";
import type { ReleaseOutcome } from "../locker.js";
import type { LockHandle } from "./backend.js";

/**
 * Lifecycle of one acquisition: held until released, lost on the way, or handed off to another
 * process (see `Lease.handOff`).
 */
export type AcquisitionState = "held" | "lost" | "released" | "handed-off";

/** How the lease keeper keeps an acquisition (see {@link Acquisition.keepAlive}). */
export type KeepAlive = "always" | "once" | "never";

const STATES: readonly AcquisitionState[] = ["held", "lost", "released", "handed-off"];
const KEEP_ALIVES: readonly KeepAlive[] = ["always", "once", "never"];
/** Bits of {@link Acquisition}'s flags that hold its state (the next two hold its keepAlive). */
const STATE_BITS = 3;
/** The bits of its keepAlive (shifted by 2). */
const KEEP_ALIVE_BITS = 3 << 2;
/** Set when it was granted with a `maxHold` (see {@link Acquisition.holdUntil}). */
const CAPPED = 1 << 4;
/** Set once its `maxHold` stopped its extension: running out is then a "max-hold" loss. */
const CAP_REACHED = 1 << 5;

/** When each acquisition granted with a `maxHold` must stop being extended (made on first use). */
let holdLimits: WeakMap<Acquisition, number> | undefined;

/**
 * Grant times of the acquisitions made while anyone listened for releases (see
 * {@link Acquisition.grantedAt}); made on first use, so that untraced locks pay neither a field
 * nor a lookup.
 */
let grantTimes: WeakMap<Acquisition, number> | undefined;

/**
 * Who releases an {@link Acquisition} (its engine), on behalf of which public locker (one object
 * per locker: a read-write locker's two views share an engine, not an owner).
 */
export interface AcquisitionOwner extends DiagnosticSource {
  /** Releases `acquisition`: at once (a store in this process), or a promise of what the store found. */
  releaseAcquisition(acquisition: Acquisition): Promise<ReleaseOutcome> | ReleaseOutcome;
}

/**
 * One successful acquisition of a key: the unit the locker tracks (per token, never per key),
 * extends, reports as lost, and releases. It carries its own links into the lease keeper's
 * schedule, so keeping it costs no entry in a shared Set or Map.
 *
 * It is also its own {@link LockHandle} (token, resource, validity), taken over from the grant's
 * handle: a held lock is one object besides its release function and its strings. Its times are
 * whole milliseconds, rounded down (earlier: on the safe side), so that V8 keeps them as small
 * integers in the object instead of a separate heap number each (until `performance.now()` passes
 * 2^31 ms, some 24 days of uptime, when they become heap numbers: more memory, same behaviour).
 */
export class Acquisition extends Releasable implements Linked<Acquisition>, LockHandle {
  /** Its state and keepAlive, as indexes into STATES and KEEP_ALIVES: one small integer. */
  #flags = 0;
  /**
   * Made on first use (most acquisitions never need one): the controller whose signal aborts when
   * the lock is lost; or, before anyone asked for that signal, why the lock was lost, once it was.
   */
  #lost: AbortController | Error | undefined;
  /** When the lease keeper next acts on it (monotonic ms): extend, or retry an extension. */
  due = 0;
  /** Links of the lease keeper's schedule (see {@link IntrusiveList}). */
  prev: Acquisition | undefined;
  next: Acquisition | undefined;
  list: IntrusiveList<Acquisition> | undefined;
  // Its LockHandle part, documented once there (editors show that documentation here too);
  // the times in whole ms, rounded down (see above).
  readonly token: string;
  readonly resource: string;
  validFrom: number;
  validUntil: number;
  handedTo: string | undefined;

  constructor(
    readonly owner: AcquisitionOwner,
    /** The caller's key (no prefix). */
    readonly key: string,
    /** The grant's handle: its token, resource and validity are taken over. */
    handle: LockHandle,
    /** The lease length this acquisition is extended by, in ms. */
    readonly duration: number,
    /**
     * The fencing token issued with this grant, when asked for (set once, before the caller sees
     * the acquisition, when it arrives after the grant).
     */
    public fencingToken: bigint | undefined,
  ) {
    super();
    this.token = handle.token;
    this.resource = handle.resource;
    this.validFrom = Math.floor(handle.validFrom);
    this.validUntil = Math.floor(handle.validUntil);
  }

  /** Held until released, or lost on the way. */
  get state(): AcquisitionState {
    return STATES[this.#flags & STATE_BITS] as AcquisitionState;
  }

  set state(state: AcquisitionState) {
    this.#flags = (this.#flags & ~STATE_BITS) | STATES.indexOf(state);
  }

  /**
   * How the lease keeper keeps it: extended while held (`"always"`), extended once to its full
   * lease and then left to expire (`"once"`: a hand-off grant with `autoExtend: false`, whose TTL
   * is the short grace), or never (`"never"`: left to expire).
   */
  get keepAlive(): KeepAlive {
    return KEEP_ALIVES[(this.#flags & KEEP_ALIVE_BITS) >> 2] as KeepAlive;
  }

  set keepAlive(keepAlive: KeepAlive) {
    this.#flags = (this.#flags & ~KEEP_ALIVE_BITS) | (KEEP_ALIVES.indexOf(keepAlive) << 2);
  }

  /**
   * `performance.now()` past which its lease must not be extended (a `maxHold` cap), or `Infinity`
   * (no cap: most acquisitions, which pay neither a field nor a lookup for it).
   */
  get holdUntil(): number {
    return (this.#flags & CAPPED) === 0
      ? Number.POSITIVE_INFINITY
      : (holdLimits?.get(this) ?? Number.POSITIVE_INFINITY);
  }

  set holdUntil(holdUntil: number) {
    holdLimits ??= new WeakMap();
    holdLimits.set(this, holdUntil);
    this.#flags |= CAPPED;
  }

  /** True once its `maxHold` stopped its extension (see {@link reachCap}). */
  get capReached(): boolean {
    return (this.#flags & CAP_REACHED) !== 0;
  }

  /** Its `maxHold` is reached: it is no longer extended, and runs out as a "max-hold" loss. */
  reachCap(): void {
    this.#flags |= CAP_REACHED;
    this.keepAlive = "never";
  }

  /** `performance.now()` at the grant, recorded only while anyone listens for releases. */
  get grantedAt(): number | undefined {
    return grantTimes?.get(this);
  }

  set grantedAt(grantedAt: number | undefined) {
    if (grantedAt === undefined) {
      grantTimes?.delete(this);
      return;
    }
    grantTimes ??= new WeakMap();
    grantTimes.set(this, grantedAt);
  }

  /** Its own {@link LockHandle}: what the store extends and releases. */
  get handle(): LockHandle {
    return this;
  }

  /** Records a successful (re)set of the TTL by a command sent at `sentAt` (see {@link LockHandle.renew}). */
  renew(sentAt: number, validUntil: number): void {
    this.validFrom = Math.floor(sentAt);
    this.validUntil = Math.floor(validUntil);
  }

  /** Its own {@link Releasable} (kept as a name the locker's code reads well with). */
  get releaser(): Releasable {
    return this;
  }

  releaseRoutine(): Promise<ReleaseOutcome> | ReleaseOutcome {
    return this.owner.releaseAcquisition(this);
  }

  /** Aborts with a LockLostError when the lock is found lost (see {@link markLost}). */
  get lostSignal(): AbortSignal {
    const lost = this.#lost;
    if (lost instanceof AbortController) return lost.signal;
    const controller = new AbortController();
    if (lost !== undefined) controller.abort(lost);
    this.#lost = controller;
    return controller.signal;
  }

  /** Records the loss and aborts the signal if anyone has it. */
  markLost(reason: Error): void {
    this.state = "lost";
    const lost = this.#lost;
    if (lost instanceof AbortController) lost.abort(reason);
    else this.#lost = reason;
  }
}
