import type { AttemptOutcome } from "../backend.js";
import type { LockLostError } from "../errors.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import type { ResolvedAcquireOptions } from "../internal/validate.js";
import type { KeyStates } from "../internal/waiter.js";
import type { AcquisitionOwner } from "./acquisition.js";
import type { Attempts } from "./attempts.js";
import type { Holdings } from "./holdings.js";
import type { Lifetime } from "./lifetime.js";
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
 * The parts of one {@link LockCore}, as the wait loop, the grant desk and the waiters reach them
 * (one object per core, made once).
 */
export interface CoreParts {
  readonly options: CoreSettings;
  /** The store, with its capabilities. */
  readonly store: Store;
  /** Per key: how many acquisitions are held here, and who waits here (FIFO). */
  readonly keys: KeyStates;
  /** The close signal and the store operations in flight. */
  readonly lifetime: Lifetime;
  /** One attempt, and the clean-up of an abandoned one. */
  readonly attempts: Attempts;
  /** The leases held: registration, release. */
  readonly holdings: Holdings;
  /** This locker's id in the stores' queues. */
  readonly waiterId: string;
  /** Counted locks (semaphores, read-write locks): every waiter has its own queue entry. */
  readonly counted: boolean;
}
