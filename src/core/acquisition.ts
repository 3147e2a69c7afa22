import type { LockHandle } from "../backend.js";
import type { DiagnosticSource } from "../internal/diagnostics.js";
import type { Chained } from "../internal/intrusive-list.js";
import { ReleaseRunner } from "../internal/release-func.js";
import type { ReleaseFunc, ReleaseOutcome } from "../locker.js";

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
/** The bits (shifted by 6) that say which list of its lane it is in (see {@link Acquisition.listTag}). */
const LIST_SHIFT = 6;
const LIST_BITS = 3 << LIST_SHIFT;
/** Set when waiters may be queued behind it (see {@link Acquisition.contended}). */
const CONTENDED = 1 << 8;
/**
 * Set when its release handed the key to nobody (`grantedTo === ""`, what most releases find): a
 * flag, so that such a release makes no {@link Rare}.
 */
const GRANTED_TO_NOBODY = 1 << 9;

/** When each acquisition granted with a `maxHold` must stop being extended (made on first use). */
let holdLimits: WeakMap<Acquisition, number> | undefined;

/**
 * Grant times of the acquisitions made while anyone listened for releases (see
 * {@link Acquisition.grantedAt}); made on first use, so that untraced locks pay neither a field
 * nor a lookup.
 */
let grantTimes: WeakMap<Acquisition, number> | undefined;

/**
 * Who releases an {@link Acquisition} (its core), on behalf of which public locker (one object
 * per locker: a read-write locker's two views share a core, not an owner).
 */
export interface AcquisitionOwner extends DiagnosticSource {
  /**
   * Releases `acquisition`: at once (a store in this process), or a promise of what the store
   * found. Never throws or rejects (a release that failed reports "unknown").
   */
  releaseAcquisition(acquisition: Acquisition): Promise<ReleaseOutcome> | ReleaseOutcome;
  /** The store's name for `key` (see `Naming.resourceOf`). */
  resourceOf(key: string): string;
  /** Declares `acquisition` lost to its expiry (its deadline passed before the keeper noticed). */
  expireAcquisition(acquisition: Acquisition): void;
  /** Hands `acquisition`, `weight` permits as the store counts them, off (see `Lease.handOff`). */
  handOffAcquisition(acquisition: Acquisition, weight: number): Promise<string>;
  /** The terms of its acquisitions of lease length `duration` (see {@link AcquisitionTerms}). */
  termsOf(duration: number): AcquisitionTerms;
}

/** What the acquisitions of one owner with one lease length share: one object for all of them. */
export class AcquisitionTerms {
  constructor(
    readonly owner: AcquisitionOwner,
    /** The lease length its acquisitions are extended by, in ms. */
    readonly duration: number,
  ) {}
}

/**
 * What few acquisitions need, kept off the {@link Acquisition} until one does (one field for
 * three): its `lost` controller or loss, where a release handed its key, its fencing token.
 */
class Rare {
  /**
   * The controller whose signal aborts when the lock is lost; or, before anyone asked for that
   * signal, why the lock was lost, once it was.
   */
  lost: AbortController | Error | undefined;
  grantedTo: string | undefined;
  fencingToken: bigint | undefined;
  /** When the lease keeper retries its failed extension (monotonic ms; see {@link Acquisition.retryAt}). */
  retryAt = 0;
}

/**
 * One successful acquisition of a key: the unit the locker tracks (per token, never per key),
 * extends, reports as lost, and releases. It carries its own links into the lease keeper's
 * schedule, so keeping it costs no entry in a shared Set or Map.
 *
 * It is also its own {@link LockHandle} (token, resource, validity), taken over from the grant's
 * handle: a held lock is one object besides its token (its release function is made when asked
 * for, its resource name from its key when needed, and what few acquisitions need lives in a
 * {@link Rare} made on first use). Its times are whole milliseconds, rounded down (earlier: on the
 * safe side), so that V8 keeps them as small integers in the object instead of a separate heap
 * number each (until `performance.now()` passes 2^31 ms, some 24 days of uptime, when they become
 * heap numbers: more memory, same behaviour).
 */
export class Acquisition extends ReleaseRunner implements Chained<Acquisition>, LockHandle {
  /** Its state and keepAlive, as indexes into STATES and KEEP_ALIVES: one small integer. */
  #flags = 0;
  /** Made on first use (see {@link Rare}). */
  #rare: Rare | undefined;
  /** Links of the lease keeper's schedule (see `LeaseList`: which list, its {@link listTag}). */
  prev: Acquisition | undefined;
  next: Acquisition | undefined;
  // Its LockHandle part, documented once there (editors show that documentation here too);
  // the times in whole ms, rounded down (see above).
  readonly token: string;
  validUntil: number;

  constructor(
    /** Its owner and lease length (shared with the owner's other acquisitions of that length). */
    readonly terms: AcquisitionTerms,
    /** The caller's key (no prefix). */
    readonly key: string,
    /** The grant's handle: its token and validity are taken over (its resource is `owner.resourceOf(key)`). */
    handle: LockHandle,
    /**
     * The fencing token issued with this grant, when asked for (set once, before the caller sees
     * the acquisition, when it arrives after the grant).
     */
    fencingToken: bigint | undefined,
  ) {
    super();
    this.token = handle.token;
    this.validUntil = Math.floor(handle.validUntil);
    if (fencingToken !== undefined) this.fencingToken = fencingToken;
    if (handle.contended) this.contended = true;
  }

  /** Who releases it, on behalf of which locker (see {@link AcquisitionOwner}). */
  get owner(): AcquisitionOwner {
    return this.terms.owner;
  }

  /** The lease length it is extended by, in ms. */
  get duration(): number {
    return this.terms.duration;
  }

  /**
   * The store's name for its key, made from the key on each read (a held lock keeps one string
   * fewer; a store reads it when it extends or releases the lock).
   */
  get resource(): string {
    return this.owner.resourceOf(this.key);
  }

  /**
   * No earlier than the command that last set its lease was sent (see {@link LockHandle.validFrom}):
   * its deadline minus its lease, not recorded (the keeper schedules from deadlines).
   */
  get validFrom(): number {
    return this.validUntil - this.duration;
  }

  /**
   * When the lease keeper retries its failed extension (monotonic ms), while it waits to: a rare
   * event, kept off the object (its next extension is due from its deadline: see `LeaseKeeper`).
   */
  get retryAt(): number {
    return this.#rare?.retryAt ?? 0;
  }

  set retryAt(retryAt: number) {
    this.rareFields().retryAt = retryAt;
  }

  /** Where a release handed its key (see {@link LockHandle.grantedTo}). */
  get grantedTo(): string | undefined {
    return (this.#flags & GRANTED_TO_NOBODY) !== 0 ? "" : this.#rare?.grantedTo;
  }

  set grantedTo(grantedTo: string | undefined) {
    if (grantedTo === "") {
      this.#flags |= GRANTED_TO_NOBODY;
      if (this.#rare !== undefined) this.#rare.grantedTo = undefined;
      return;
    }
    this.#flags &= ~GRANTED_TO_NOBODY;
    if (grantedTo !== undefined || this.#rare !== undefined) this.rareFields().grantedTo = grantedTo;
  }

  /**
   * The fencing token issued with this grant, when asked for (set once, before the caller sees
   * the acquisition, when it arrives after the grant).
   */
  get fencingToken(): bigint | undefined {
    return this.#rare?.fencingToken;
  }

  set fencingToken(fencingToken: bigint | undefined) {
    if (fencingToken !== undefined || this.#rare !== undefined) this.rareFields().fencingToken = fencingToken;
  }

  /** Its {@link Rare}, made if needed (not a `#` method: those cost every instance a brand field). */
  private rareFields(): Rare {
    this.#rare ??= new Rare();
    return this.#rare;
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
   * Which of its lane's lists it is in (1–3; 0: none), kept in its flags instead of a field (see
   * `LeaseList`).
   */
  get listTag(): number {
    return (this.#flags & LIST_BITS) >> LIST_SHIFT;
  }

  set listTag(tag: number) {
    this.#flags = (this.#flags & ~LIST_BITS) | (tag << LIST_SHIFT);
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

  /** Whether waiters may be queued behind it (see {@link LockHandle.contended}). */
  get contended(): boolean {
    return (this.#flags & CONTENDED) !== 0;
  }

  set contended(contended: boolean) {
    this.#flags = contended ? this.#flags | CONTENDED : this.#flags & ~CONTENDED;
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

  /** Records a successful (re)set of the TTL (see {@link LockHandle.renew}): its deadline, all it keeps. */
  renew(_sentAt: number, validUntil: number): void {
    this.validUntil = Math.floor(validUntil);
  }

  /**
   * Its {@link ReleaseFunc}: made on each read, not kept (the locker reads it once, to hand it to
   * the caller); every one made releases this acquisition, once.
   */
  get release(): ReleaseFunc {
    return this.newReleaseFunc();
  }

  /** Its own {@link ReleaseRunner} (kept as a name the locker's code reads well with). */
  get releaser(): ReleaseRunner {
    return this;
  }

  releaseRoutine(): Promise<ReleaseOutcome> | ReleaseOutcome {
    return this.owner.releaseAcquisition(this);
  }

  /** Its owner's release never throws or rejects (see {@link AcquisitionOwner.releaseAcquisition}). */
  override get routineNeverFails(): boolean {
    return true;
  }

  /** Its deadline passed before the keeper noticed: declares it lost (see `LeaseSource`). */
  deadlinePassed(): void {
    this.owner.expireAcquisition(this);
  }

  /** Hands it off, `weight` permits as the store counts them (see `Lease.handOff`). */
  handOff(weight: number): Promise<string> {
    return this.owner.handOffAcquisition(this, weight);
  }

  /** True once it was handed off. */
  get handedOff(): boolean {
    return this.state === "handed-off";
  }

  /** Aborts with a LockLostError when the lock is found lost (see {@link markLost}). */
  get lostSignal(): AbortSignal {
    const rare = this.rareFields();
    const lost = rare.lost;
    if (lost instanceof AbortController) return lost.signal;
    const controller = new AbortController();
    if (lost !== undefined) controller.abort(lost);
    rare.lost = controller;
    return controller.signal;
  }

  /** Records the loss and aborts the signal if anyone has it. */
  markLost(reason: Error): void {
    this.state = "lost";
    const rare = this.rareFields();
    if (rare.lost instanceof AbortController) rare.lost.abort(reason);
    else rare.lost = reason;
  }
}
