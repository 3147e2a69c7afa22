import type { LockLostError } from "../errors.js";
import type { CloseGate } from "../internal/abortable.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import type { ResolvedAcquireOptions } from "../internal/validate.js";
import type { KeyStates } from "../internal/waiter.js";
import type { Acquisition, AcquisitionOwner } from "./acquisition.js";
import type { AttemptOutcome, LockHandle, Queueing, Registration } from "./backend.js";
import type { Store } from "./store.js";

/** The settings the core needs from a locker's resolved options (a store adds its own). */
export interface CoreSettings {
  /** The default lease length, in ms. */
  readonly expiry: number;
  /** The bound of one store operation, in ms (extensions are scheduled to land before deadlines). */
  readonly operationTimeout: number;
  /** The safety net's first and longest wait between attempts, in ms. */
  readonly backoffMin: number;
  readonly backoffMax: number;
  /** How many extension calls may be in flight at once. */
  readonly sweepConcurrency: number;
  /** The user's hook for lost leases; what it throws is swallowed. */
  readonly onLockLost: ((error: LockLostError) => void) | undefined;
  /**
   * The shortest `expiry` an acquisition may ask for, in ms (default {@link MIN_EXPIRY_MS}): a
   * store whose leases are never extended over a network (memory) accepts shorter ones.
   */
  readonly minExpiry?: number;
  /**
   * Who the locker's holders are, as `inspect` shows them (at most 256 bytes; default
   * `${os.hostname()}:${process.pid}`).
   */
  readonly owner?: string;
}

/** One waiting call (`lock`, `acquire`): what its attempts and its grant are made with. */
export interface AcquireCall {
  readonly signal: AbortSignal | undefined;
  readonly key: string;
  readonly request: ResolvedAcquireOptions;
  /** Whose acquisition it becomes (the public locker). */
  readonly owner: AcquisitionOwner;
  /** While the call is traced: counts its attempts. */
  readonly probe: AcquireProbe | undefined;
}

/** An attempt that did not acquire: someone else holds the key, or the grant came too late. */
export type Miss = Exclude<AttemptOutcome, { kind: "acquired" }>;

/**
 * What the parts of one {@link LockCore} share: its backend, key states and settings, and the
 * steps the wait loop and the grant desk take through the core (one object per core, made once).
 */
export interface CoreParts {
  readonly options: CoreSettings;
  readonly store: Store;
  /** Per key: how many acquisitions are held here, and who waits here (FIFO). */
  readonly keys: KeyStates<LockHandle, Registration>;
  /** This locker's id in the cross-process grant queues. */
  readonly waiterId: string;
  /** Aborts (with a LockerClosedError) when the locker closes. */
  readonly closing: AbortSignal;
  /** Cuts in-flight operations short on close. */
  readonly gate: CloseGate;
  /** Counted locks (semaphores, read-write locks): every waiter has its own queue entry. */
  readonly counted: boolean;
  /** The three ways an attempt relates to the grant queue (shared: attempts allocate none). */
  readonly queueings: Readonly<Record<"first" | "leave" | "keep", Queueing>>;
  /** Registers a store operation that `close()` waits for. */
  track<T>(promise: Promise<T>): Promise<T>;
  /** The store's name of `key` (kept on its key state). */
  resourceOf(key: string): string;
  /** True when `error` is this call's abort or the locker's close, not a failed attempt. */
  isAbandonment(error: unknown, signal: AbortSignal | undefined): boolean;
  /** One abortable acquisition attempt of `call` (see LockCore). */
  attempt(call: AcquireCall, queueing: Queueing): Promise<Acquisition | Miss> | Acquisition | Miss;
  /** {@link attempt} on a store in this process (one with `acquireNow`), answered at once. */
  attemptNow(call: AcquireCall, queueing: Queueing): Acquisition | Miss;
  /** Starts keeping a key handed over to `call` by the store's queue (see LockCore). */
  registerGrant(call: AcquireCall, handle: LockHandle): Acquisition;
}
