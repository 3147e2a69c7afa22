import { InvalidArgumentError, LockLostError, type LockLostReason } from "../errors.js";
import type { Acquisition, AcquisitionOwner } from "./acquisition.js";
import { encodeHandOff, type HandOffContent } from "./hand-off-handle.js";
import type { Holdings } from "./holdings.js";
import type { Lifetime } from "./lifetime.js";
import type { Store } from "./store.js";

/**
 * Lease transfer between processes: `Lease.handOff` here, `Locker.adopt` there. The handle names
 * the locker's kind and the store's scope; the store swaps the lease's token (see `HandOff`).
 */
export class LeaseTransfer {
  readonly #store: Store;
  readonly #holdings: Holdings;
  readonly #lifetime: Lifetime;

  constructor(store: Store, holdings: Holdings, lifetime: Lifetime) {
    this.#store = store;
    this.#holdings = holdings;
    this.#lifetime = lifetime;
  }

  /**
   * Hands `acquisition` off: extends it once (so that it no longer depends on this process),
   * stops keeping it here, and encodes its handle; `kind` is its locker's kind.
   */
  async handOff(acquisition: Acquisition, kind: string, weight: number): Promise<string> {
    const support = this.#store.handOff("Handing off a lease");
    if (acquisition.state !== "held" || acquisition.started) throw notHeld(acquisition);
    const keeper = this.#holdings.keeper;
    const outcome = await this.#lifetime.track(
      support.detach === undefined
        ? this.#store.extend([acquisition.handle], acquisition.duration).then(([first]) => first)
        : support.detach(acquisition.handle, acquisition.duration),
    );
    if (acquisition.state !== "held" || acquisition.started) throw notHeld(acquisition);
    if (outcome === "taken" || outcome === "expired") {
      keeper.markLost(acquisition, outcome);
      throw new LockLostError(acquisition.key, outcome);
    }
    if (outcome !== "extended") throw outcome ?? new Error("The store answered no extension outcome");
    if (keeper.remove(acquisition)) this.#holdings.forget(acquisition);
    acquisition.state = "handed-off";
    const { key, token, duration, fencingToken } = acquisition;
    return encodeHandOff({ scope: `${kind}|${support.scope}`, key, token, weight, duration, fencingToken });
  }

  /** Throws an InvalidArgumentError unless `content` is a handle of a locker of `kind` on this store. */
  checkScope(content: HandOffContent, kind: string): void {
    const support = this.#store.handOff("Adopting a lease");
    if (content.scope !== `${kind}|${support.scope}`) {
      throw new InvalidArgumentError(
        "handle",
        `a handle from a locker of the same kind and store (${kind}|${support.scope}); it is from ${content.scope}`,
        "(a handle: not shown)",
      );
    }
  }

  /**
   * Takes over the lease a decoded handle names on behalf of `owner` (call {@link checkScope}
   * first): swaps its token in the store, and keeps it from then on.
   */
  async adopt(
    signal: AbortSignal | undefined,
    content: HandOffContent,
    autoExtend: boolean,
    owner: AcquisitionOwner,
  ): Promise<Acquisition> {
    const { key, token, weight, duration, fencingToken } = content;
    const resource = this.#store.resourceOf(key);
    const lifetime = this.#lifetime;
    const adopted = await lifetime.gate.race(
      this.#store.adopt({ resource, token, weight, duration }),
      signal,
      lifetime.inFlight,
    );
    if (typeof adopted === "string") throw new LockLostError(key, adopted);
    const request = { fencing: fencingToken !== undefined, weight, autoExtend, expiry: duration, maxHold: undefined };
    return this.#holdings.register(key, adopted, fencingToken, request, false, owner);
  }
}

/** The error of a hand-off of a lease no longer held: what its `lost` says, else released or handed off. */
function notHeld(acquisition: Acquisition): LockLostError {
  if (acquisition.state === "held") return new LockLostError(acquisition.key, "released");
  return new LockLostError(acquisition.key, lostReason(acquisition));
}

/** Why a lease that is no longer held is not: what its `lost` says, else released or handed off. */
function lostReason(acquisition: Acquisition): LockLostReason {
  if (acquisition.state === "handed-off") return "handed-off";
  const lost = acquisition.lostSignal;
  return lost.aborted && lost.reason instanceof LockLostError ? lost.reason.reason : "released";
}
