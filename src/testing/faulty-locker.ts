import { InvalidArgumentError, LockLostError, type LockLostReason, StoreUnavailableError } from "../errors.js";
import { getOrInsert } from "../internal/get-or-insert.js";
import { noopRelease, Releasable } from "../internal/release-func.js";
import { validateKey } from "../internal/validate.js";
import type {
  AcquireOptions,
  AdoptOptions,
  Lease,
  ListOptions,
  Locker,
  LockInfo,
  ReleaseFunc,
  ReleaseOutcome,
} from "../locker.js";
import { MemoryLocker } from "../memory/memory-locker.js";

/** The store operations a {@link FaultyLocker} can fail (see {@link FaultyLocker.failNext}). */
export type FaultKind = "acquire" | "release" | "extend";

const FAULT_KINDS: readonly FaultKind[] = ["acquire", "release", "extend"];
const LOSS_REASONS: readonly LockLostReason[] = ["taken", "expired", "max-hold"];

/**
 * A {@link Locker} for tests of code that locks: it behaves as the locker it wraps (by default a
 * new `MemoryLocker`) until told to fail, so the "lock lost" and "store down" paths of a caller
 * can be exercised without a server.
 *
 * - {@link loseLease} loses every lease of a key held through it, at once: each `lost` aborts
 *   with a `LockLostError` (reason `"expired"` unless told), `assertHeld` throws, and the key is
 *   freed (the wrapped lease is released). A later release of a lost lease does nothing and says
 *   `"expired"` (or `"taken"`).
 * - {@link failNext} makes the next operations of a kind fail as a store that cannot be reached
 *   would: `"acquire"` — the next `lock`, `tryLock`, `acquire`, `tryAcquire` or `adopt` calls
 *   reject with a `StoreUnavailableError` (nothing is taken); `"release"` — the next releases
 *   report `"unknown"` (a release never rejects; the key is freed all the same, as if its lease had
 *   run out at once); `"extend"` — the next leases due for extension find the store down until
 *   their lease runs out: each is lost with reason `"expired"` (the oldest held first; with none
 *   held, the next granted, as soon as it is granted).
 *
 * Everything else (`inspect`, hand-offs, `close`) is the wrapped locker's; `close` closes it.
 * Nothing here depends on a test runner.
 */
export class FaultyLocker implements Locker {
  readonly #inner: Locker;
  /** Leases held through this locker, by key, in grant order. */
  readonly #held = new Map<string, Set<FaultyLease>>();
  readonly #faults: Record<FaultKind, number> = { acquire: 0, release: 0, extend: 0 };

  /** @param inner the locker to wrap (default: a new `MemoryLocker`). */
  constructor(inner: Locker = new MemoryLocker()) {
    const candidate = inner as Partial<Locker> | null;
    if (typeof candidate?.acquire !== "function" || typeof candidate.tryAcquire !== "function") {
      throw new InvalidArgumentError("inner", "a Locker", inner);
    }
    this.#inner = inner;
  }

  /**
   * Loses every lease of `key` held through this locker now (see the class comment) and frees
   * the key; returns how many were lost.
   */
  loseLease(key: string, reason: LockLostReason = "expired"): number {
    validateKey(key);
    if (!LOSS_REASONS.includes(reason)) {
      throw new InvalidArgumentError("reason", `one of ${LOSS_REASONS.map((r) => `"${r}"`).join(", ")}`, reason);
    }
    const leases = [...(this.#held.get(key) ?? [])];
    for (const lease of leases) lease.lose(reason);
    return leases.length;
  }

  /** Makes the next `count` (default 1) operations of `kind` fail (see the class comment). */
  failNext(kind: FaultKind, count = 1): void {
    if (!FAULT_KINDS.includes(kind)) {
      throw new InvalidArgumentError("kind", `one of ${FAULT_KINDS.map((k) => `"${k}"`).join(", ")}`, kind);
    }
    if (!Number.isSafeInteger(count) || count < 1)
      throw new InvalidArgumentError("count", "a safe integer >= 1", count);
    this.#faults[kind] += count;
    if (kind === "extend") this.#failExtensions();
  }

  /** Leases held through the wrapped locker, as it counts them (`NaN` when it does not). */
  get heldCount(): number {
    return countOf(this.#inner, "heldCount");
  }

  /** Callers waiting in the wrapped locker, as it counts them (`NaN` when it does not). */
  get waitingCount(): number {
    return countOf(this.#inner, "waitingCount");
  }

  /** `Locker.lock` of the wrapped locker (an `"acquire"` fault rejects it first). */
  async lock(signal: AbortSignal | undefined, key: string): Promise<ReleaseFunc> {
    return (await this.acquire(signal, key)).release;
  }

  /** `Locker.tryLock` of the wrapped locker (an `"acquire"` fault rejects it first). */
  async tryLock(signal: AbortSignal | undefined, key: string): Promise<[acquired: boolean, release: ReleaseFunc]> {
    const lease = await this.tryAcquire(signal, key);
    return lease === undefined ? [false, noopRelease()] : [true, lease.release];
  }

  /** `Locker.acquire` of the wrapped locker (an `"acquire"` fault rejects it first); its lease can be lost on demand. */
  async acquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease> {
    this.#injectAcquireFault(key);
    return this.#wrap(await this.#inner.acquire(signal, key, options));
  }

  /** `Locker.tryAcquire` of the wrapped locker (an `"acquire"` fault rejects it first). */
  async tryAcquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease | undefined> {
    this.#injectAcquireFault(key);
    const lease = await this.#inner.tryAcquire(signal, key, options);
    return lease === undefined ? undefined : this.#wrap(lease);
  }

  /** `Locker.adopt` of the wrapped locker (an `"acquire"` fault rejects it first). */
  async adopt(signal: AbortSignal | undefined, handle: string, options?: AdoptOptions): Promise<Lease> {
    this.#injectAcquireFault("(adopted lease)");
    return this.#wrap(await this.#inner.adopt(signal, handle, options));
  }

  /** `Locker.inspect` of the wrapped locker. */
  inspect(signal: AbortSignal | undefined, key: string): Promise<LockInfo> {
    return this.#inner.inspect(signal, key);
  }

  /** `Locker.list` of the wrapped locker. */
  list(signal: AbortSignal | undefined, options?: ListOptions): Promise<LockInfo[]> {
    return this.#inner.list(signal, options);
  }

  /** Closes the wrapped locker (see {@link Locker.close}). */
  close(): Promise<void> {
    return this.#inner.close();
  }

  #injectAcquireFault(key: string): void {
    if (this.#faults.acquire === 0) return;
    this.#faults.acquire -= 1;
    throw new StoreUnavailableError(key, `FaultyLocker: the store could not be reached (injected) for "${key}"`, {
      cause: new Error('injected by FaultyLocker.failNext("acquire")'),
    });
  }

  /** Takes a release fault if one is due. */
  readonly #takeReleaseFault = (): boolean => {
    if (this.#faults.release === 0) return false;
    this.#faults.release -= 1;
    return true;
  };

  #wrap(inner: Lease): FaultyLease {
    const lease = new FaultyLease(inner, this.#takeReleaseFault, (ended) => this.#forget(ended));
    getOrInsert(this.#held, lease.key, () => new Set()).add(lease);
    this.#failExtensions();
    return lease;
  }

  #forget(lease: FaultyLease): void {
    const leases = this.#held.get(lease.key);
    leases?.delete(lease);
    if (leases?.size === 0) this.#held.delete(lease.key);
  }

  /** Loses the oldest held leases while extension faults are due. */
  #failExtensions(): void {
    while (this.#faults.extend > 0) {
      const oldest = this.#oldest();
      if (oldest === undefined) return;
      this.#faults.extend -= 1;
      // Not while the caller is still being handed the lease: a loss is observed after a grant.
      queueMicrotask(() => oldest.lose("expired"));
      this.#forget(oldest);
    }
  }

  #oldest(): FaultyLease | undefined {
    let oldest: FaultyLease | undefined;
    for (const leases of this.#held.values()) {
      for (const lease of leases) {
        if (oldest === undefined || lease.serial < oldest.serial) oldest = lease;
        break; // grant order within a key: its first is its oldest
      }
    }
    return oldest;
  }
}

/** A count a locker reports (every locker of this package does), or `NaN`. */
function countOf(locker: Locker, name: "heldCount" | "waitingCount"): number {
  const count = (locker as Partial<Record<typeof name, unknown>>)[name];
  return typeof count === "number" ? count : Number.NaN;
}

let serials = 0;

/** A lease held through a {@link FaultyLocker}: the wrapped lease, losable on demand. */
class FaultyLease extends Releasable implements Lease {
  readonly key: string;
  readonly lost: AbortSignal;
  readonly fencingToken?: bigint;
  /** Grant order (the oldest is lost first by an extension fault). */
  readonly serial = ++serials;
  readonly #inner: Lease;
  readonly #takeReleaseFault: () => boolean;
  readonly #lost = new AbortController();
  readonly #onEnded: (lease: FaultyLease) => void;
  #handedOff = false;

  constructor(inner: Lease, takeReleaseFault: () => boolean, onEnded: (lease: FaultyLease) => void) {
    super();
    this.#inner = inner;
    this.#takeReleaseFault = takeReleaseFault;
    this.#onEnded = onEnded;
    this.key = inner.key;
    this.lost = this.#lost.signal;
    if (inner.fencingToken !== undefined) this.fencingToken = inner.fencingToken;
    const follow = (): void => {
      if (!this.#lost.signal.aborted) this.#lost.abort(inner.lost.reason);
      onEnded(this);
    };
    if (inner.lost.aborted) follow();
    else inner.lost.addEventListener("abort", follow, { once: true });
  }

  /** Loses this lease now (see {@link FaultyLocker.loseLease}) and frees its key. */
  lose(reason: LockLostReason): void {
    if (this.#lost.signal.aborted || this.started || this.#handedOff) return;
    this.#lost.abort(new LockLostError(this.key, reason));
    this.#onEnded(this);
    void this.#inner.release();
  }

  assertHeld(): void {
    if (this.#lost.signal.aborted) throw this.#lost.signal.reason;
    this.#inner.assertHeld();
  }

  releaseWithOutcome(): Promise<ReleaseOutcome> {
    return this.run();
  }

  async releaseRoutine(): Promise<ReleaseOutcome> {
    this.#onEnded(this);
    if (this.#lost.signal.aborted) {
      const reason = this.#lost.signal.reason;
      await this.#inner.release();
      return reason instanceof LockLostError && reason.reason === "taken" ? "taken" : "expired";
    }
    const failed = this.#takeReleaseFault();
    const outcome = await this.#inner.releaseWithOutcome();
    return failed ? "unknown" : outcome;
  }

  async handOff(): Promise<string> {
    if (this.#lost.signal.aborted) throw this.#lost.signal.reason;
    const handle = await this.#inner.handOff();
    this.#handedOff = true;
    this.#onEnded(this);
    return handle;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}
