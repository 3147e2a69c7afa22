import type { LockerKind } from "../diagnostics.js";
import type { AcquireOptions, AdoptOptions, Lease, ListOptions, Locker, LockInfo, ReleaseFunc } from "../locker.js";
import { type AcquireProbe, acquireTraced, type DiagnosticSource, traceAcquire } from "./diagnostics.js";
import { noopRelease } from "./release-func.js";

/**
 * A `lock` or `tryLock` call as a locker runs it: its arguments, and the diagnostics message of a
 * traced call (`undefined` otherwise).
 */
export type LockCall = [signal: AbortSignal | undefined, key: string, probe: AcquireProbe | undefined];

/** An `acquire` or `tryAcquire` call as a locker runs it (see {@link LockCall}). */
export type AcquireCall = [
  signal: AbortSignal | undefined,
  key: string,
  options: AcquireOptions | undefined,
  probe: AcquireProbe | undefined,
];

/**
 * The four acquisition methods of a {@link Locker}, traced on the `globallock:acquire` channel
 * while anyone listens (see `../diagnostics.ts`). A subclass implements the calls themselves
 * (`lockCall`, …): they get the diagnostics message of a traced call as `probe` (to fill in its
 * weight and attempts), and `undefined` otherwise — then nothing is built: no message, no closure,
 * no clock read, one boolean check per call.
 */
export abstract class TracedLocker implements Locker {
  /**
   * This locker in diagnostics messages.
   * @internal
   */
  protected readonly diagnostics: DiagnosticSource;

  /**
   * @param kind what diagnostics messages call this locker.
   * @param locker the public locker these calls are made on, when it is not this object (a
   *   `MemorySemaphore` delegates to one).
   */
  protected constructor(kind: LockerKind, locker?: Locker) {
    this.diagnostics = { locker: locker ?? this, kind };
  }

  /** {@inheritDoc Locker.lock} */
  lock(signal: AbortSignal | undefined, key: string): Promise<ReleaseFunc> {
    if (!acquireTraced()) return this.lockCall(signal, key, undefined);
    return traceAcquire(this.diagnostics, "lock", key, 1, signal, (probe) => this.lockCall(signal, key, probe));
  }

  /** {@inheritDoc Locker.tryLock} */
  tryLock(signal: AbortSignal | undefined, key: string): Promise<[acquired: boolean, release: ReleaseFunc]> {
    if (!acquireTraced()) return this.tryLockCall(signal, key, undefined);
    return traceAcquire(this.diagnostics, "tryLock", key, 1, signal, (probe) => this.tryLockCall(signal, key, probe));
  }

  /** {@inheritDoc Locker.acquire} */
  acquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease> {
    if (!acquireTraced()) return this.acquireCall(signal, key, options, undefined);
    return traceAcquire(this.diagnostics, "acquire", key, undefined, signal, (probe) =>
      this.acquireCall(signal, key, options, probe),
    );
  }

  /** {@inheritDoc Locker.tryAcquire} */
  tryAcquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease | undefined> {
    if (!acquireTraced()) return this.tryAcquireCall(signal, key, options, undefined);
    return traceAcquire(this.diagnostics, "tryAcquire", key, undefined, signal, (probe) =>
      this.tryAcquireCall(signal, key, options, probe),
    );
  }

  /** {@inheritDoc Locker.adopt} */
  abstract adopt(signal: AbortSignal | undefined, handle: string, options?: AdoptOptions): Promise<Lease>;

  /** {@inheritDoc Locker.inspect} */
  abstract inspect(signal: AbortSignal | undefined, key: string): Promise<LockInfo>;

  /** {@inheritDoc Locker.list} */
  abstract list(signal: AbortSignal | undefined, options?: ListOptions): Promise<LockInfo[]>;

  /** {@inheritDoc Locker.close} */
  abstract close(): Promise<void>;

  /**
   * `lock` itself: must reject (not throw) on bad input. By default an `acquire` with default
   * options, keeping only its release; a locker with a cheaper path overrides it.
   * @internal
   */
  protected async lockCall(signal: LockCall[0], key: LockCall[1], probe: LockCall[2]): Promise<ReleaseFunc> {
    return (await this.acquireCall(signal, key, undefined, probe)).release;
  }

  /**
   * `tryLock` itself. By default a `tryAcquire` with default options (see {@link lockCall}).
   * @internal
   */
  protected async tryLockCall(
    signal: LockCall[0],
    key: LockCall[1],
    probe: LockCall[2],
  ): Promise<[acquired: boolean, release: ReleaseFunc]> {
    const lease = await this.tryAcquireCall(signal, key, undefined, probe);
    return lease === undefined ? [false, noopRelease()] : [true, lease.release];
  }

  /**
   * `acquire` itself; sets `probe.weight` once the options are validated.
   * @internal
   */
  protected abstract acquireCall(...call: AcquireCall): Promise<Lease>;

  /**
   * `tryAcquire` itself; sets `probe.weight` once the options are validated.
   * @internal
   */
  protected abstract tryAcquireCall(...call: AcquireCall): Promise<Lease | undefined>;
}
