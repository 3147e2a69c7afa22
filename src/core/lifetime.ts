import { setMaxListeners } from "node:events";
import { LockerClosedError } from "../errors.js";
import { CloseGate } from "../internal/abortable.js";
import { InFlight } from "../internal/in-flight.js";

/**
 * What lives until a locker closes: the close signal every waiter listens to, the gate that cuts
 * in-flight attempts short, and the count of store operations that `close()` waits for.
 */
export class Lifetime {
  readonly #closing = new AbortController();
  /** Cuts in-flight attempts short on close (waits listen to {@link closing} instead). */
  readonly gate = new CloseGate();
  /** Store operations in flight (close waits for them). */
  readonly inFlight = new InFlight();

  constructor() {
    // Every waiter listens for close; many waiters are normal, not a leak.
    setMaxListeners(0, this.#closing.signal);
  }

  /** Aborts (with a LockerClosedError) when the locker closes. */
  get closing(): AbortSignal {
    return this.#closing.signal;
  }

  /** Counts `operation` in flight until it settles; returns it. */
  track<T>(operation: Promise<T>): Promise<T> {
    return this.inFlight.track(operation);
  }

  /** True when `error` is this call's abort or the locker's close, not a failed operation. */
  isAbandonment(error: unknown, signal: AbortSignal | undefined): boolean {
    return (signal?.aborted === true && error === signal.reason) || error === this.#closing.signal.reason;
  }

  /** Aborts every wait and cuts every race short with a LockerClosedError. */
  end(): void {
    const closed = new LockerClosedError();
    this.#closing.abort(closed);
    this.gate.close(closed);
  }

  /** Resolves once no store operation is in flight. */
  drained(): Promise<void> {
    return this.inFlight.drained();
  }
}
