import { LockerClosedError } from "../errors.js";
import { onAnyAbort } from "../internal/abortable.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import { noopRelease } from "../internal/release-func.js";
import { TracedLocker } from "../internal/traced-locker.js";
import { snapshotOptions, validateKey, validateSignal } from "../internal/validate.js";
import type { AcquireOptions, Lease, Locker, ReleaseFunc, ReleaseOutcome } from "../locker.js";
import { HeldRelease, type MemoryAcquireOptions, memoryLease, resolveMemoryAcquireOptions } from "./memory-lease.js";

/**
 * Options of {@link MemoryLocker}. There are none yet; the bag is reserved for the future: pass
 * `undefined` or `{}` (any key is an `InvalidArgumentError`).
 */
export type MemoryLockerOptions = Record<string, never>;

/** One caller queued for a held key; `grant` hands it the key. */
interface QueuedCaller {
  grant(token: symbol): void;
}

/** A held key: who holds it now (by acquisition token) and who waits, in arrival order. */
interface HeldKey {
  token: symbol;
  readonly queue: Set<QueuedCaller>;
}

/** What `weight` above 1 is refused with. */
const LOCK_LIMIT = "a lock's limit is 1";

/**
 * An in-process {@link Locker}: mutual exclusion between callers of one Node.js process.
 *
 * Waiting keeps the shape of Gitea's memory locker (a wait that can be given up at any time) but
 * not its 100 ms polling: a release hands the key straight to the longest-waiting caller (FIFO),
 * with no timer on the path. An aborted waiter leaves the queue at once and leaves nothing behind;
 * a key's entry is deleted as soon as nobody holds or waits for it.
 *
 * A lock is held by its process and never expires, so `expiry` alone changes nothing. With
 * `{ autoExtend: false, expiry }` the lock is freed `expiry` ms after the grant unless released
 * first (an unref'ed timer, only for such acquisitions): the next waiter gets it, the lease's
 * `lost` aborts with reason `"expired"`, and a later release reports `"expired"`.
 */
export class MemoryLocker extends TracedLocker implements Locker {
  readonly #held = new Map<string, HeldKey>();
  readonly #closing = new AbortController();
  /** One counter for every key: it rises with every fenced grant, so it rises per key too. */
  #lastFencingToken = 0n;
  /** Callers queued for a held key. */
  #waiting = 0;

  /** Creates an empty locker. `options` is reserved and must be undefined or an empty object. */
  constructor(options?: MemoryLockerOptions) {
    super("memory-lock");
    snapshotOptions("options", options, []);
  }

  /** Number of keys currently held (or reserved for a woken waiter). */
  get heldCount(): number {
    return this.#held.size;
  }

  /** Number of callers waiting in `lock` or `acquire` for a key held now. */
  get waitingCount(): number {
    return this.#waiting;
  }

  /** {@inheritDoc Locker.close} */
  override async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort(new LockerClosedError());
  }

  // The calls themselves (see TracedLocker); `probe` is the diagnostics message while traced.

  /** @internal */
  protected override async lockCall(
    signal: AbortSignal | undefined,
    key: string,
    probe: AcquireProbe | undefined,
  ): Promise<ReleaseFunc> {
    this.#checkCall(signal, key, probe);
    const token = await this.#obtain(signal, key);
    return this.#releaser(key, token).release;
  }

  /** @internal */
  protected override async tryLockCall(
    signal: AbortSignal | undefined,
    key: string,
    probe: AcquireProbe | undefined,
  ): Promise<[acquired: boolean, release: ReleaseFunc]> {
    this.#checkCall(signal, key, probe);
    if (this.#held.has(key)) return [false, noopRelease()];
    return [true, this.#releaser(key, this.#take(key)).release];
  }

  /** @internal */
  protected async acquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease> {
    const resolved = resolveMemoryAcquireOptions(options, 1, LOCK_LIMIT);
    if (probe !== undefined) probe.weight = resolved.weight;
    this.#checkCall(signal, key, probe);
    return this.#lease(key, await this.#obtain(signal, key), resolved);
  }

  /** @internal */
  protected async tryAcquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease | undefined> {
    const resolved = resolveMemoryAcquireOptions(options, 1, LOCK_LIMIT);
    if (probe !== undefined) probe.weight = resolved.weight;
    this.#checkCall(signal, key, probe);
    if (this.#held.has(key)) return undefined;
    return this.#lease(key, this.#take(key), resolved);
  }

  /** Validates a call and refuses it when closed or aborted; a traced call then makes its one attempt. */
  #checkCall(
    signal: unknown,
    key: unknown,
    probe: AcquireProbe | undefined,
  ): asserts signal is AbortSignal | undefined {
    validateSignal(signal);
    validateKey(key);
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
    signal?.throwIfAborted();
    if (probe !== undefined) probe.attempts = 1;
  }

  /** Takes `key` now if it is free, or waits for it to be handed over. */
  #obtain(signal: AbortSignal | undefined, key: string): Promise<symbol> | symbol {
    const entry = this.#held.get(key);
    return entry === undefined ? this.#take(key) : this.#waitForHandOff(signal, entry);
  }

  #take(key: string): symbol {
    const token = Symbol(key);
    this.#held.set(key, { token, queue: new Set() });
    return token;
  }

  #lease(key: string, token: symbol, { fencing, expiry }: MemoryAcquireOptions): Lease {
    const fencingToken = fencing ? ++this.#lastFencingToken : undefined;
    return memoryLease(this.diagnostics, key, () => this.#release(key, token), expiry, fencingToken);
  }

  #releaser(key: string, token: symbol): HeldRelease {
    return new HeldRelease(this.diagnostics, key, () => this.#release(key, token));
  }

  /** Frees `key` if `token` still holds it, handing it to the next queued caller if there is one. */
  #release(key: string, token: symbol): ReleaseOutcome {
    const entry = this.#held.get(key);
    if (entry === undefined) return "expired";
    if (entry.token !== token) return "taken";
    const next = firstOf(entry.queue);
    if (next === undefined) {
      this.#held.delete(key);
      return "released";
    }
    entry.queue.delete(next);
    entry.token = Symbol(key);
    next.grant(entry.token);
    return "released";
  }

  #waitForHandOff(signal: AbortSignal | undefined, entry: HeldKey): Promise<symbol> {
    return new Promise<symbol>((resolve, reject) => {
      const caller: QueuedCaller = {
        grant: (token) => {
          this.#waiting -= 1;
          unlisten();
          resolve(token);
        },
      };
      entry.queue.add(caller);
      this.#waiting += 1;
      // One listener per signal for the whole library, however many callers share `signal`.
      const unlisten = onAnyAbort([signal, this.#closing.signal], (reason) => {
        this.#waiting -= 1;
        entry.queue.delete(caller);
        reject(reason);
      });
    });
  }
}

function firstOf<T>(set: Set<T>): T | undefined {
  for (const item of set) return item;
  return undefined;
}
