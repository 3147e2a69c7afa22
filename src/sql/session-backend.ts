import * as contract from "../backend.js";
import { newToken } from "../internal/token.js";
import { confirmSession } from "./session-heartbeat.js";
import type { SessionSlot, SessionSlotOptions, SlotSession } from "./session-slot.js";

/**
 * What the session-lock backends (PostgreSQL's and MySQL's, locks and semaphores) share: every
 * lock lives on the locker's one session (see {@link SessionSlot}), so a lease is valid for as
 * long as that session is known alive, and one statement confirming the session extends them all.
 */
export abstract class SessionBackend<S extends SlotSession, O extends SessionSlotOptions> implements contract.Naming {
  /** The locker's resolved options. */
  protected readonly options: O;
  /** The locker's one session; set by the store's constructor (see `SessionSlot`). */
  protected abstract readonly slot: SessionSlot<S>;

  protected constructor(options: O) {
    this.options = options;
  }

  resourceOf(key: string): string {
    return this.options.prefix + key;
  }

  /** One ping confirms the session, and so every lease of the batch on it (see `confirmSession`). */
  extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    return confirmSession(this.slot.current, handles, duration, this.slot.heartbeat);
  }

  /**
   * A new lease of `resource`, taken by a statement sent at `sentAt`: valid for as long as the
   * session is known alive, `min(duration, expiry)` from then.
   */
  protected lease(resource: string, sentAt: number, duration: number): contract.LockHandle {
    return new contract.LockHandle(newToken(), resource, sentAt, sentAt + Math.min(duration, this.options.expiry));
  }
}
