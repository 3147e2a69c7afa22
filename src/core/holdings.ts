import type { LockHandle } from "../backend.js";
import { grantTime, publishRelease } from "../internal/diagnostics.js";
import type { ResolvedAcquireOptions } from "../internal/validate.js";
import type { KeyStates } from "../internal/waiter.js";
import type { LeaseKeeperStats, ReleaseOutcome } from "../locker.js";
import { Acquisition, type AcquisitionOwner } from "./acquisition.js";
import type { AcquireCall, CoreSettings } from "./core-parts.js";
import { LeaseKeeper } from "./lease-keeper.js";
import type { Lifetime } from "./lifetime.js";
import type { Store } from "./store.js";

/**
 * The leases a locker holds: how a grant becomes a kept {@link Acquisition}, how one is released
 * or lost, and who is woken after. The {@link LeaseKeeper} extends them.
 */
export class Holdings {
  readonly #settings: CoreSettings;
  readonly #store: Store;
  readonly #keys: KeyStates;
  readonly #lifetime: Lifetime;
  /** Counted locks (semaphores, read-write locks): every waiter competes on its own. */
  readonly #counted: boolean;
  /**
   * Counted locks on a store in another process: releases tell the store when waiters are likely
   * queued (see `LockHandle.contended`).
   */
  readonly #hintsContention: boolean;
  readonly keeper: LeaseKeeper;

  constructor(settings: CoreSettings, store: Store, keys: KeyStates, lifetime: Lifetime, counted: boolean) {
    this.#settings = settings;
    this.#store = store;
    this.#keys = keys;
    this.#lifetime = lifetime;
    this.#counted = counted;
    this.#hintsContention = counted && store.inProcess === undefined;
    this.keeper = new LeaseKeeper({
      store,
      operationTimeout: settings.operationTimeout,
      sweepConcurrency: settings.sweepConcurrency,
      onLockLost: settings.onLockLost,
      // A lost lock frees the key as far as this process knows: let the next waiter try.
      onLost: (acquisition) => {
        this.forget(acquisition);
        // A store whose locks never expire on their own, or a lease held until released (memory)
        // that its maxHold ended, is freed in the store by the core (sent before the next waiter
        // here tries; the holder's own release then finds it expired).
        if (store.heldUntilReleased || acquisition.duration === Number.POSITIVE_INFINITY) {
          void lifetime.track(store.release(acquisition.handle, true));
        }
        keys.notifyHead(acquisition.key);
      },
      track: (operation) => lifetime.track(operation),
    });
  }

  /** Number of leases held and kept. */
  get size(): number {
    return this.keeper.size;
  }

  /** What the lease keeper measured (see {@link LeaseKeeperStats}). */
  get stats(): LeaseKeeperStats {
    return this.keeper.stats;
  }

  /**
   * Starts keeping a fresh grant of `key` to `owner`: extension, deadline, and its release. A grant
   * from the store's queue (`fromQueue`) has the short grant grace as its TTL, so a lease that is
   * not auto-extended is still extended once, to its expiry.
   */
  register(
    key: string,
    handle: LockHandle,
    fencingToken: bigint | undefined,
    request: ResolvedAcquireOptions,
    fromQueue: boolean,
    owner: AcquisitionOwner,
  ): Acquisition {
    const terms = owner.termsOf(request.expiry ?? this.#settings.expiry);
    const acquisition = new Acquisition(terms, key, handle, fencingToken);
    // Granted from the store's queue: others may be queued behind it.
    if (fromQueue) acquisition.contended = true;
    if (!request.autoExtend) acquisition.keepAlive = fromQueue ? "once" : "never";
    if (request.maxHold !== undefined) capHold(acquisition, request.maxHold);
    const grantedAt = grantTime();
    if (grantedAt !== undefined) acquisition.grantedAt = grantedAt;
    this.#keys.hold(key);
    this.keeper.add(acquisition);
    return acquisition;
  }

  /** {@link register}s a grant the store's queue made to `call`'s registration. */
  registerGrant(call: AcquireCall, handle: LockHandle): Acquisition {
    return this.register(call.key, handle, undefined, call.request, true, call.owner);
  }

  /** Stops counting `acquisition` as held by this locker (it was released, lost or handed off). */
  forget(acquisition: Acquisition): void {
    this.#keys.unhold(acquisition.key);
  }

  /**
   * Releases `acquisition` and publishes what the release found (while anyone listens): at once on
   * a store in this process, which answers releases synchronously. Never throws or rejects (see
   * `AcquisitionOwner.releaseAcquisition`).
   */
  release(acquisition: Acquisition): Promise<ReleaseOutcome> | ReleaseOutcome {
    // Handed to another process: not ours to delete any more.
    if (acquisition.state === "handed-off") return "handed-off";
    const { handle } = acquisition;
    // A lease valid until Infinity (memory) never passes its deadline: no need to read the clock.
    const wasPastDeadline = handle.validUntil !== Number.POSITIVE_INFINITY && performance.now() >= handle.validUntil;
    const store = this.#store;
    const inProcess = store.inProcess;
    if (inProcess !== undefined) {
      this.#settleReleased(acquisition, wasPastDeadline);
      return this.#released(acquisition, wasPastDeadline, inProcess.releaseNow(handle));
    }
    // Counted: callers here waiting for the key have queued in the store (or soon will), or the
    // latest release here granted the key onward (another process's waiters are likely queued again).
    if (this.#hintsContention && !acquisition.contended) {
      const state = this.#keys.get(acquisition.key);
      if (state !== undefined && (state.grantedOnward || state.waiters.size > 0)) acquisition.contended = true;
    }
    // Sent first: the bookkeeping below runs while the command travels, and a waiter in another
    // process hears of the release that much sooner (no store reads what it changes).
    const sent = store.release(handle);
    this.#settleReleased(acquisition, wasPastDeadline);
    // Counted in flight by the reaction that acts on the answer. A store's release never rejects;
    // one that did anyway reports "unknown", so this promise never rejects.
    const inFlight = this.#lifetime.inFlight;
    inFlight.begin();
    return sent.then(
      (outcome) => {
        inFlight.end();
        return this.#releasedOrUnknown(acquisition, wasPastDeadline, outcome);
      },
      () => {
        inFlight.end();
        return this.#releasedOrUnknown(acquisition, wasPastDeadline, "unknown");
      },
    );
  }

  /**
   * After a release of `key` here (a lease's, or an abandoned attempt's late grant): wakes this
   * process's waiters unless the store granted the key to a queued waiter, whose grant says whose
   * turn it is.
   */
  wakeAfterRelease(key: string, handle: LockHandle, outcome: ReleaseOutcome): void {
    if (handle.grantedTo === "" || outcome === "unknown" || !this.#store.grants(handle.resource)) {
      // Counted, no grants: every waiter here competes on its own.
      if (this.#counted && !this.#store.grants(handle.resource)) this.#keys.notifyAll(key);
      else this.#keys.notifyHead(key);
    }
  }

  /** Releases a grant that came too late (after what it cleans up), then wakes waiters here. */
  async releaseLate(key: string, handle: LockHandle): Promise<void> {
    this.wakeAfterRelease(key, handle, await this.#store.release(handle, true));
  }

  /** {@link #released}, answering "unknown" should it throw: a release never rejects. */
  #releasedOrUnknown(acquisition: Acquisition, wasPastDeadline: boolean, outcome: ReleaseOutcome): ReleaseOutcome {
    try {
      return this.#released(acquisition, wasPastDeadline, outcome);
    } catch {
      return "unknown";
    }
  }

  /** What a release changes here: the lease is no longer kept (or is lost, if it ran out), nor held. */
  #settleReleased(acquisition: Acquisition, wasPastDeadline: boolean): void {
    // A lease left to expire whose deadline passed before its timer fired (a blocked event loop)
    // expired all the same: its `lost` says so, as if the timer had fired first.
    if (wasPastDeadline && acquisition.keepAlive === "never") this.keeper.markLost(acquisition, "expired");
    else if (this.keeper.remove(acquisition)) this.forget(acquisition);
    acquisition.state = "released";
  }

  /** The rest of {@link release} once the store answered `outcome`: wakes whoever is next here. */
  #released(acquisition: Acquisition, wasPastDeadline: boolean, outcome: ReleaseOutcome): ReleaseOutcome {
    const { handle } = acquisition;
    if (this.#hintsContention && outcome === "released") {
      const state = this.#keys.get(acquisition.key);
      if (state !== undefined) state.grantedOnward = handle.grantedTo !== undefined && handle.grantedTo !== "";
    }
    this.wakeAfterRelease(acquisition.key, handle, outcome);
    // A lease left to expire that ran out before its release expired, whoever holds the key now.
    const found = outcome === "taken" && acquisition.keepAlive === "never" && wasPastDeadline ? "expired" : outcome;
    return publishRelease(acquisition.owner, acquisition.key, acquisition.grantedAt, found);
  }
}

/**
 * Caps how long `acquisition` is kept: `maxHold` ms from now. A lease held until released
 * (memory: valid until `Infinity`) is left to run out at the cap instead.
 */
function capHold(acquisition: Acquisition, maxHold: number): void {
  const holdUntil = Math.floor(performance.now() + maxHold);
  acquisition.holdUntil = holdUntil;
  if (acquisition.validUntil === Number.POSITIVE_INFINITY) {
    acquisition.validUntil = holdUntil;
    acquisition.reachCap();
  }
}
