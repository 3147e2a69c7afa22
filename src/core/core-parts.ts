import type { CloseGate } from "../internal/abortable.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import type { ResolvedAcquireOptions } from "../internal/validate.js";
import type { KeyStates } from "../internal/waiter.js";
import { Waiter } from "../internal/waiter.js";
import type { Acquisition, AcquisitionOwner } from "./acquisition.js";
import type { AttemptOutcome, Backend, Grant, LockHandle, QueueIntent, Registration } from "./backend.js";
import type { CoreSettings } from "./lock-core.js";

/** An attempt that did not acquire: someone else holds the key, or the grant came too late. */
export type Miss = Exclude<AttemptOutcome, { kind: "acquired" }>;

/**
 * What the parts of one {@link LockCore} share: its backend, key states and settings, and the
 * steps the wait loop and the grant desk take through the core (one object per core, made once).
 */
export interface CoreParts {
  readonly options: CoreSettings;
  readonly store: Backend;
  /** Per key: how many acquisitions are held here, and who waits here (FIFO). */
  readonly keys: KeyStates<LockHandle, Registration>;
  /** This locker's id in the cross-process hand-off queues. */
  readonly waiterId: string;
  /** Aborts (with a LockerClosedError) when the locker closes. */
  readonly closing: AbortSignal;
  /** Cuts in-flight operations short on close. */
  readonly gate: CloseGate;
  /** Counted locks (semaphores, read-write locks): every waiter has its own queue entry. */
  readonly counted: boolean;
  /** Counted locks: waiters by their own id in the store's queue. */
  readonly countedWaiters: Map<string, CountedWaiter>;
  /** The three ways an attempt relates to the hand-off queue (shared: attempts allocate none). */
  readonly intents: Readonly<Record<"first" | "leave" | "keep", QueueIntent>>;
  /** Registers a store operation that `close()` waits for. */
  track<T>(promise: Promise<T>): Promise<T>;
  /** The store's name of `key` (kept on its key state). */
  resourceOf(key: string): string;
  /** True when `error` is this call's abort or the locker's close, not a failed attempt. */
  isAbandonment(error: unknown, signal: AbortSignal | undefined): boolean;
  /** One abortable acquisition attempt (see LockCore). */
  attempt(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions,
    intent: QueueIntent,
    owner: AcquisitionOwner,
    probe: AcquireProbe | undefined,
  ): Promise<Acquisition | Miss>;
  /** Starts keeping a fresh grant (see LockCore). */
  register(
    key: string,
    handle: LockHandle,
    fencingToken: bigint | undefined,
    request: ResolvedAcquireOptions,
    handedOver: boolean,
    owner: AcquisitionOwner,
  ): Acquisition;
}

/** A waiter of a counted lock: it has its own place in the store's queue (see `#obtainCounted`). */
export class CountedWaiter extends Waiter<LockHandle> {
  /** True while its attempt is in flight. */
  attempting = false;
  /** Its latest registration in the store's queue, not yet seen granted. */
  registration: Registration | undefined;
  /** A grant message that arrived while its attempt was in flight. */
  earlyGrant: Grant | undefined;

  constructor(
    /** Its id in the store's queue: the locker's id, a dot, and a sequence number. */
    readonly id: string,
  ) {
    super();
  }
}
