/**
 * The core of the in-memory semaphore and read-write locker: a weighted, strictly FIFO store of
 * permits per key ({@link PermitStore}) and the {@link Locker} over it ({@link PermitLocker}).
 */
import type { LockerKind } from "../diagnostics.js";
import { LockerClosedError, UnsupportedError } from "../errors.js";
import { onAnyAbort } from "../internal/abortable.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import { IntrusiveList, type Linked } from "../internal/intrusive-list.js";
import { TracedLocker } from "../internal/traced-locker.js";
import { validateKey, validateSignal } from "../internal/validate.js";
import type { AcquireOptions, Lease, Locker, ReleaseOutcome } from "../locker.js";
import { type MemoryAcquireOptions, memoryLease, resolveMemoryAcquireOptions } from "./memory-lease.js";

/** One caller queued for permits of a key that did not fit when it arrived (or had callers ahead). */
class QueuedCaller implements Linked<QueuedCaller> {
  prev: QueuedCaller | undefined;
  next: QueuedCaller | undefined;
  list: IntrusiveList<QueuedCaller> | undefined;

  constructor(
    readonly permits: number,
    readonly grant: (permit: Permit) => void,
  ) {}
}

/** A key with permits in use: how many, and who waits, in arrival order (the entry is its queue). */
class KeyPermits extends IntrusiveList<QueuedCaller> {
  /** Permits held now (always above 0 while the entry exists). */
  used = 0;

  constructor(readonly key: string) {
    super();
  }
}

/** One grant (the per-acquisition token): freed once, so a stale release never touches another. */
export class Permit {
  #held = true;

  constructor(
    readonly entry: KeyPermits,
    readonly permits: number,
  ) {}

  /** Marks the grant freed; returns whether it was held until now. */
  end(): boolean {
    const held = this.#held;
    this.#held = false;
    return held;
  }
}

/**
 * At most `limit` permits of each key in use at once, served strictly in arrival order: a caller
 * that does not fit waits, and everyone who arrives after it waits behind it even if they would
 * fit (so a heavy caller is never overtaken forever by light ones). A release admits callers from
 * the head of the queue for as long as they fit. A key's entry exists only while permits of it are
 * held: nothing is left behind.
 */
export class PermitStore {
  readonly limit: number;
  readonly #keys = new Map<string, KeyPermits>();
  #waiting = 0;
  /** One counter for every key: it rises with every fenced grant, so it rises per key too. */
  #lastFencingToken = 0n;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Keys with permits in use. */
  get heldCount(): number {
    return this.#keys.size;
  }

  /** Callers queued for permits, over all keys. */
  get waitingCount(): number {
    return this.#waiting;
  }

  /** The next fencing token (rising with every call). */
  nextFencingToken(): bigint {
    this.#lastFencingToken += 1n;
    return this.#lastFencingToken;
  }

  /** Takes `permits` of `key` if they fit now and nobody is queued for the key; else `undefined`. */
  tryTake(key: string, permits: number): Permit | undefined {
    let entry = this.#keys.get(key);
    if (entry === undefined) {
      entry = new KeyPermits(key);
      this.#keys.set(key, entry);
    } else if (entry.size > 0 || entry.used + permits > this.limit) {
      return undefined;
    }
    entry.used += permits;
    return new Permit(entry, permits);
  }

  /**
   * Takes `permits` of `key` now, or queues for them until they are granted or one of `signals`
   * aborts (rejecting with its reason and leaving the queue; no later caller stays blocked by it).
   * When `closing` aborts, queued callers are rejected without admitting anyone in their place.
   */
  take(key: string, permits: number, signal: AbortSignal | undefined, closing: AbortSignal): Permit | Promise<Permit> {
    return this.tryTake(key, permits) ?? this.#enqueue(key, permits, signal, closing);
  }

  /** Gives `permit` back (once) and admits the callers it lets in. */
  free(permit: Permit): ReleaseOutcome {
    if (!permit.end()) return "expired";
    permit.entry.used -= permit.permits;
    this.#admit(permit.entry);
    return "released";
  }

  #enqueue(key: string, permits: number, signal: AbortSignal | undefined, closing: AbortSignal): Promise<Permit> {
    // A caller queues only behind permits in use, so the key has an entry.
    const entry = this.#keys.get(key) as KeyPermits;
    return new Promise<Permit>((resolve, reject) => {
      const caller = new QueuedCaller(permits, (permit) => {
        unlisten();
        resolve(permit);
      });
      entry.push(caller);
      this.#waiting += 1;
      // One listener per signal for the whole library, however many callers share `signal`.
      const unlisten = onAnyAbort([signal, closing], (reason) => {
        entry.remove(caller);
        this.#waiting -= 1;
        // A caller that leaves may have been what blocked the ones behind it; not when closing.
        if (!closing.aborted) this.#admit(entry);
        reject(reason);
      });
    });
  }

  /** Grants queued callers from the head while they fit; drops the entry once nothing is in use. */
  #admit(entry: KeyPermits): void {
    for (let head = entry.head; head !== undefined; head = entry.head) {
      if (entry.used + head.permits > this.limit) break;
      entry.shift();
      this.#waiting -= 1;
      entry.used += head.permits;
      head.grant(new Permit(entry, head.permits));
    }
    if (entry.used === 0) this.#keys.delete(entry.key);
  }
}

/** How a {@link PermitLocker} maps its acquisitions onto a (possibly shared) {@link PermitStore}. */
export interface PermitView {
  readonly store: PermitStore;
  /** Aborted (with a LockerClosedError) when the locker closes; shared by views closed together. */
  readonly closing: AbortController;
  /** The largest `weight` option accepted, and how the error explains it. */
  readonly maxWeight: number;
  readonly maxWeightReason: string;
  /** Permits an acquisition of `weight` takes from the store. */
  permits(weight: number): number;
  /** Why `fencing` is refused (an UnsupportedError), or `undefined` when grants are exclusive. */
  readonly unfenced: string | undefined;
  /** What diagnostics messages call this locker. */
  readonly kind: LockerKind;
  /** The public locker these calls are made on, in diagnostics messages (default: the PermitLocker). */
  readonly locker?: Locker;
}

/**
 * A {@link Locker} over a {@link PermitStore}: the memory semaphore is one, and each view of the
 * memory read-write locker is one (sharing the store and the closing signal with the other).
 * Every acquisition gets its own {@link Permit}, released once; waiting is in the store's FIFO
 * queue, woken by releases (no timers), abortable, rejected on close.
 */
export class PermitLocker extends TracedLocker implements Locker {
  readonly #view: PermitView;

  constructor(view: PermitView) {
    super(view.kind, view.locker);
    this.#view = view;
  }

  /** Keys with permits in use (of every view sharing the store). */
  get heldCount(): number {
    return this.#view.store.heldCount;
  }

  /** Callers queued for permits, over all keys (of every view sharing the store). */
  get waitingCount(): number {
    return this.#view.store.waitingCount;
  }

  // The calls themselves (see TracedLocker); `probe` is the diagnostics message while traced.

  /** @internal */
  protected async acquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease> {
    const resolved = this.#resolve(options, probe);
    this.#checkCall(signal, key, probe);
    const { store, closing } = this.#view;
    const permit = await store.take(key, this.#view.permits(resolved.weight), signal, closing.signal);
    return this.#lease(key, permit, resolved);
  }

  /** @internal */
  protected async tryAcquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease | undefined> {
    const resolved = this.#resolve(options, probe);
    this.#checkCall(signal, key, probe);
    const permit = this.#view.store.tryTake(key, this.#view.permits(resolved.weight));
    return permit === undefined ? undefined : this.#lease(key, permit, resolved);
  }

  /** {@inheritDoc Locker.close} */
  override async close(): Promise<void> {
    const { closing } = this.#view;
    if (!closing.signal.aborted) closing.abort(new LockerClosedError());
  }

  /**
   * Validates the options; refuses fencing (before anything is taken) where grants are shared.
   * Tells a traced call's `probe` the weight asked for.
   */
  #resolve(options: unknown, probe: AcquireProbe | undefined): MemoryAcquireOptions {
    const { maxWeight, maxWeightReason, unfenced } = this.#view;
    const resolved = resolveMemoryAcquireOptions(options, maxWeight, maxWeightReason);
    if (probe !== undefined) probe.weight = resolved.weight;
    if (resolved.fencing && unfenced !== undefined) throw new UnsupportedError(unfenced);
    return resolved;
  }

  /** Validates a call and refuses it when closed or aborted; a traced call then makes its one attempt. */
  #checkCall(
    signal: unknown,
    key: unknown,
    probe: AcquireProbe | undefined,
  ): asserts signal is AbortSignal | undefined {
    validateSignal(signal);
    validateKey(key);
    const closing = this.#view.closing.signal;
    if (closing.aborted) throw closing.reason;
    signal?.throwIfAborted();
    if (probe !== undefined) probe.attempts = 1;
  }

  #lease(key: string, permit: Permit, { fencing, expiry }: MemoryAcquireOptions): Lease {
    const { store } = this.#view;
    const fencingToken = fencing ? store.nextFencingToken() : undefined;
    return memoryLease(this.diagnostics, key, () => store.free(permit), expiry, fencingToken);
  }
}
