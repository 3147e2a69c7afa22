import { performance } from "node:perf_hooks";
import * as contract from "../backend.js";
import { InFlight } from "../internal/in-flight.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { MemcachedCommands, unavailable } from "./commands.js";
import { type KeyNames, lockValue, parseLockValue, ttlSecondsOf, validUntilOf } from "./layout.js";
import type { ResolvedMemcachedLockerOptions } from "./options.js";
import { MemcachedReleaseWatcher } from "./release-bus.js";
import { RestartGuard } from "./restart-guard.js";
import type { MemcachedClient } from "./types.js";

/**
 * Compare-and-swaps of one write sent before it gives up: a CAS unique changes under a write only
 * when this locker wrote the item meanwhile (an extension beside a release), as nobody else
 * knows its token.
 */
const CAS_ROUNDS = 3;

const NO_CAS = "Memcached keeps no CAS uniques (started with -C): a lock can be neither extended nor released";

/** What a compare-and-swap on a lock item found. */
type Swap = "written" | "gone" | "taken";

/**
 * The backend of {@link MemcachedLocker} (Symfony's MemcachedStore):
 *
 * - A lock is an item added (`add`: only if absent) with its token, lease and owner, for the lease
 *   rounded up to whole seconds plus two (see `ttlSecondsOf`); after the `add`, the prefix's
 *   {@link RestartGuard} says whether the server may grant it.
 * - Extension and release read the item with its CAS unique (`gets`), compare its token, and write
 *   with `cas`: a holder never extends nor deletes another's lock, and a write lands only on the
 *   item it read. A release is a `cas` with a negative TTL (stored expired: a compare-and-delete).
 * - An item gone (evicted, flushed, deleted, the server restarted) is found at the next extension:
 *   the lock is lost ("taken").
 * - No grant queue and no release notifications: waiters poll (the core's safety net), woken at
 *   once only by releases of lockers in this process (see {@link MemcachedReleaseWatcher}).
 * - No fencing tokens: Memcached has no counter that survives a restart or an eviction.
 */
export function memcachedBackend(
  client: MemcachedClient,
  options: ResolvedMemcachedLockerOptions,
  names: KeyNames,
): contract.BackendFactory {
  return (context) => new MemcachedBackend(client, options, names, context.owner, context.events);
}

class MemcachedBackend implements contract.Backend, contract.Naming, contract.HandOff {
  readonly can: contract.Capabilities = {
    naming: this,
    handOff: this,
    fencing: {
      unsupported:
        "Memcached issues none: it has no counter that survives a restart or an eviction (use a store with fencing where writes must be fenced)",
    },
    listing: {
      unsupported:
        "Memcached cannot name its keys (it has no reliable way to enumerate them; `stats cachedump` shows a sample)",
    },
  };
  readonly watcher: MemcachedReleaseWatcher;
  /** Handles adopt across lockers of the same namespace and prefix. */
  readonly scope: string;
  readonly #commands: MemcachedCommands;
  readonly #names: KeyNames;
  readonly #guard: RestartGuard;
  readonly #options: ResolvedMemcachedLockerOptions;
  readonly #owner: string;
  /** Deletions of locks nobody holds (late or refused grants); close waits for them. */
  readonly #cleanUps = new InFlight();

  constructor(
    client: MemcachedClient,
    options: ResolvedMemcachedLockerOptions,
    names: KeyNames,
    owner: string,
    events: contract.BackendEvents,
  ) {
    this.#options = options;
    this.#names = names;
    this.#owner = owner;
    this.#commands = new MemcachedCommands(client, options.operationTimeout);
    this.#guard = new RestartGuard(this.#commands, names);
    this.scope = `memcached:${client.namespace ?? ""}${options.prefix}`;
    this.watcher = new MemcachedReleaseWatcher(client, names, events, () => this.#cleanUps.drained());
  }

  resourceOf(key: string): string {
    const resource = this.#names.resourceOf(key);
    this.watcher.remember(key, resource);
    return resource;
  }

  /**
   * One `add`; when it stores the lock, one `get` of the guard's items. A miss of a waiter (an
   * attempt that would join a queue) reads the holder's item too, to say when the server frees it
   * should its holder stop extending it.
   */
  async acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const { resource, duration } = request;
    const closedFor = this.#guard.knownClosed();
    if (closedFor !== undefined) return { kind: "held", retryAfterMs: closedFor };
    const token = newToken();
    const sentAt = performance.now();
    const stored = await this.#commands.add(
      resource,
      lockValue(token, duration, this.#owner),
      ttlSecondsOf(duration),
      // Stored after all, once the attempt had given up: nobody holds it.
      (late) => late && this.#deleteLater(resource, token),
    );
    if (!stored) return request.queueing.joinOnMiss ? this.#heldUntil(resource) : { kind: "held" };
    let guard: Awaited<ReturnType<RestartGuard["check"]>>;
    try {
      guard = await this.#guard.check(Math.max(duration, this.#options.expiry));
    } catch (error) {
      this.#deleteLater(resource, token);
      throw error;
    }
    if (!guard.open) {
      this.#deleteLater(resource, token);
      return { kind: "held", retryAfterMs: guard.retryAfterMs };
    }
    const handle = new contract.LockHandle(token, resource, sentAt, validUntilOf(sentAt, duration));
    if (performance.now() >= handle.validUntil) {
      this.#cleanUps.track(this.release(handle));
      return { kind: "expired-on-arrival" };
    }
    return { kind: "acquired", handle };
  }

  /**
   * A miss, with when the server frees the holder's item if it is not extended again: its write
   * time (by its writer's clock) plus its TTL. Past or implausible (clocks apart): no hint. A
   * failed read is no hint either (the attempt itself was answered).
   */
  async #heldUntil(resource: string): Promise<contract.AttemptOutcome> {
    try {
      const value = await this.#commands.get(resource);
      // Released meanwhile: try again at once.
      if (value === undefined) return { kind: "held", retryAfterMs: 1 };
      const lock = parseLockValue(value);
      if (lock === undefined) return { kind: "held" };
      const ttlMs = ttlSecondsOf(lock.durationMs) * 1000;
      const freedIn = lock.writtenAt + ttlMs - Date.now();
      return freedIn > 0 && freedIn <= ttlMs ? { kind: "held", retryAfterMs: Math.ceil(freedIn) } : { kind: "held" };
    } catch {
      return { kind: "held" };
    }
  }

  /** Extends each lock where its item still holds its token (one `gets` and one `cas` each). */
  extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    return Promise.all(handles.map((handle) => this.#extendOne(handle, duration)));
  }

  async #extendOne(handle: contract.LockHandle, duration: number): Promise<contract.ExtendOutcome> {
    if (performance.now() >= handle.validUntil) return "expired";
    const { resource, token } = handle;
    let sentAt = 0;
    try {
      const swapped = await this.#swap(resource, token, (cas) => {
        sentAt = performance.now();
        return this.#commands.cas(resource, lockValue(token, duration, this.#owner), cas, ttlSecondsOf(duration));
      });
      if (swapped !== "written") return "taken";
      // The write set the item's TTL afresh: the lease is what it set (unless a later write's answer came first).
      if (sentAt >= handle.validFrom) handle.renew(sentAt, validUntilOf(sentAt, duration));
      return "extended";
    } catch (error) {
      return error instanceof Error ? error : unavailable(resource, error);
    }
  }

  /** Deletes the lock where its item still holds the handle's token (`gets`, then `cas` stored expired). */
  async release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    const { resource, token } = handle;
    try {
      const swapped = await this.#swap(resource, token, (cas) => this.#commands.cas(resource, "", cas, -1));
      if (swapped === "taken") return "taken";
      // Free now (deleted, or gone already): waiters of other lockers here may try.
      this.watcher.publish(resource);
      return swapped === "gone" || performance.now() >= handle.validUntil ? "expired" : "released";
    } catch {
      // Not known deleted: the item runs out with its TTL.
      return "unknown";
    }
  }

  /**
   * Takes over a handed-off lock: where its item still holds the handed token, writes it with a
   * fresh token of this locker and a full lease (`gets`, then `cas`).
   */
  async adopt(request: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const { resource, token, duration } = request;
    const fresh = newToken();
    let sentAt = 0;
    const swapped = await this.#swap(resource, token, (cas) => {
      sentAt = performance.now();
      return this.#commands.cas(resource, lockValue(fresh, duration, this.#owner), cas, ttlSecondsOf(duration));
    });
    if (swapped === "taken") return "taken";
    if (swapped === "gone") return "expired";
    return new contract.LockHandle(fresh, resource, sentAt, validUntilOf(sentAt, duration));
  }

  /**
   * The holder of `resource` as its item says (one `get`): its owner, and its lease's end by its
   * writer's clock (Memcached reads no TTL back); an item written by something else shows an owner
   * of `""` ending now. Memcached knows of no waiters.
   */
  async inspect(resource: string): Promise<contract.StoredView> {
    const value = await this.#commands.get(resource);
    if (value === undefined) return { holders: [], waiting: 0 };
    const lock = parseLockValue(value);
    const expiresInMs = lock === undefined ? 0 : Math.max(0, lock.writtenAt + lock.durationMs - Date.now());
    return { holders: [{ owner: lock?.owner ?? "", weight: 1, expiresInMs }], waiting: 0 };
  }

  /**
   * Reads the item with its CAS unique and, while it holds `token`, calls `write` with that unique
   * until a write lands ({@link CAS_ROUNDS} at most). Rejects with a StoreUnavailableError.
   */
  async #swap(resource: string, token: string, write: (cas: string) => Promise<boolean>): Promise<Swap> {
    for (let round = 0; round < CAS_ROUNDS; round++) {
      const read = await this.#commands.gets(resource);
      if (read === undefined) return "gone";
      if (parseLockValue(read.value)?.token !== token) return "taken";
      if (read.cas === "0") throw unavailable(resource, new Error(NO_CAS));
      if (await write(read.cas)) return "written";
    }
    throw unavailable(resource, new Error(`its item changed under ${CAS_ROUNDS} compare-and-swaps in a row`));
  }

  /** Deletes the lock `token` of `resource` in the background, if its item still holds it. */
  #deleteLater(resource: string, token: string): void {
    this.#cleanUps.track(this.#swap(resource, token, (cas) => this.#commands.cas(resource, "", cas, -1)));
  }
}
