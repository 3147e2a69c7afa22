import { performance } from "node:perf_hooks";
import * as contract from "../backend.js";
import { UnsupportedError } from "../errors.js";
import type { ReleaseOutcome } from "../locker.js";
import { connectionOf } from "./client/connection-of.js";
import { FENCING_COUNTER_TTL_MS, fencingCounterKey } from "./fencing.js";
import { listHeld, type RedisListing } from "./list-keys.js";
import { NodeExtension } from "./node-extension.js";
import { NodeReleases } from "./node-releases.js";
import { ownedToken, ownerTokenPrefix } from "./owner-token.js";
import { acquirePermitsArguments, permitSettings } from "./permit-scripts.js";
import { ScriptKeys } from "./script-keys.js";
import { ScriptRunner } from "./script-runner.js";
import { LOCK_SCRIPTS, PERMIT_SCRIPTS, type ScriptSet } from "./script-sets.js";
import { unavailable } from "./store-errors.js";
import { lockView, permitView } from "./stored-views.js";
import { adoptBySwap } from "./swap-adoption.js";
import type { RedisClient } from "./types.js";
import { leaseHandle, ranOutOnArrival } from "./validity.js";

/** Settings of {@link SingleNodeStore}. */
export interface SingleNodeStoreSettings {
  readonly commandTimeout: number;
  readonly driftFactor: number;
  /** The TTL of a key a release grants to the next waiter, in ms (its first extension lengthens it). */
  readonly grantGrace: number;
  /** How long a queued waiter counts as alive after it last tried, in ms. */
  readonly livenessWindow: number;
  /**
   * Permits per key, for counted locks (semaphores, read-write locks: see permit-scripts.ts);
   * `undefined` for plain locks (one token per key, scripts.ts).
   */
  readonly limit?: number | undefined;
  /**
   * The channel this store's locker listens on for grants: registered with every place it takes
   * in a grant queue, so a release tells the grantee alone.
   */
  readonly grantChannel: string;
  /** The locker's key prefix (see {@link SingleNodeStore.resourceOf}). */
  readonly prefix: string;
  /** The locker's owner: carried in every token it writes (see owner-token.ts). */
  readonly owner: string;
  /** How the locker hears releases (see redis-backend.ts). */
  readonly watcher: contract.ReleaseWatcher;
}

/** What ACQUIRE_PERMITS answers for permits taken while waiters may be queued (see LockHandle.contended). */
const ACQUIRED_CONTENDED = 2;

/**
 * Locks on one Redis node or one Cluster (each key lives on one master), with our own scripts: an
 * attempt is one round trip (a failure also says how long the holder's lease has left and enters
 * the key's grant queue), and a release hands the key to the longest-waiting live locker
 * instead of letting every waiter race for it. For a single client a quorum is trivial, so redlock
 * would only add a clean-up round trip to every failed attempt.
 *
 * With a `limit` it keeps counted locks instead (semaphores, read-write locks): a key is a set of
 * holders, each taking `weight` permits, and the queue is served strictly in arrival order.
 */
export class SingleNodeStore
  implements contract.Backend, contract.Naming, contract.WaitQueue, contract.Fencing, contract.HandOff, contract.Listing
{
  readonly #runner: ScriptRunner;
  readonly #cluster: boolean;
  readonly #settings: SingleNodeStoreSettings;
  /** The KEYS arrays of each resource's scripts. */
  readonly #keys: ScriptKeys;
  readonly #scripts: ScriptSet;
  /** Counted locks (a `limit`): every attempt runs the permit script. */
  readonly #counted: boolean;
  /** The settings argument of counted locks' attempts (see permitSettings; "" for locks). */
  readonly #permitSettings: string;
  /** ARGV appended to leave-queue calls of counted locks: limit (none for locks). */
  readonly #limitArgs: readonly number[];
  /** What every token of this store starts with: its locker's owner (see owner-token.ts). */
  readonly #tokenPrefix: string;
  readonly #extension: NodeExtension;
  readonly #releases: NodeReleases;
  readonly #listing: RedisListing;
  readonly watcher: contract.ReleaseWatcher;
  readonly can: contract.Capabilities;
  /** Handles of this store adopt on the same topology (one node, or a Cluster) and prefix. */
  readonly scope: string;

  constructor(client: RedisClient, settings: SingleNodeStoreSettings) {
    const connection = connectionOf(client);
    const cluster = connection.isCluster;
    const runner = new ScriptRunner(connection, cluster ? "Cluster" : "server", settings.commandTimeout);
    const { limit, driftFactor, grantGrace } = settings;
    this.#cluster = cluster;
    this.#runner = runner;
    this.#settings = settings;
    this.watcher = settings.watcher;
    this.#keys = new ScriptKeys(cluster);
    this.#counted = limit !== undefined;
    const scripts = this.#counted ? PERMIT_SCRIPTS : LOCK_SCRIPTS;
    this.#scripts = scripts;
    this.#permitSettings =
      limit === undefined
        ? ""
        : permitSettings(settings.livenessWindow, limit, grantGrace, FENCING_COUNTER_TTL_MS, settings.grantChannel);
    this.#limitArgs = limit === undefined ? [] : [limit];
    this.#tokenPrefix = ownerTokenPrefix(settings.owner);
    const lockKeys = !this.#counted;
    this.#extension = new NodeExtension({ runner, cluster, script: scripts.extendMany, lockKeys, driftFactor });
    this.#releases = new NodeReleases({ runner, script: scripts.release, grantGrace, limit });
    this.#listing = {
      nodes: () => connection.scanNodes(),
      prefix: settings.prefix,
      cluster,
      inspect: (resource) => this.inspect(resource),
      timeoutMs: settings.commandTimeout,
    };
    // A handle names the topology: a lock of one node is not a lock of a Cluster or a quorum.
    this.scope = `redis:${cluster ? "cluster" : "node"}:${settings.prefix}`;
    this.can = { naming: this, permits: true, queue: this, fencing: this, handOff: this, listing: this };
  }

  resourceOf(key: string): string {
    return this.#settings.prefix + key;
  }

  grants(resource: string): boolean {
    return this.#keys.of(resource).queued !== undefined;
  }

  checkPermits(resource: string): void {
    if (this.#settings.limit !== undefined && this.#keys.of(resource).queued === undefined) {
      throw new UnsupportedError(
        `Semaphores and read-write locks on a Redis Cluster need a key without "}" or with a {hash tag}; received "${resource}"`,
      );
    }
  }

  /**
   * One read-only script: a lock's token and PTTL, or a permit set's live members and deadlines,
   * and the live entries of the key's grant queue (a locker queues once per key for a lock,
   * once per waiting call for permits). The owner and weight come from each token. Fencing
   * tokens are not kept per holder (one counter per key), so holders have none.
   */
  async inspect(resource: string): Promise<contract.StoredView> {
    const keySet = this.#keys.of(resource);
    let reply: unknown;
    try {
      reply = await this.#runner.run(this.#scripts.inspect, keySet.queued ?? keySet.plain, []);
    } catch (error) {
      throw unavailable(resource, "inspect", [error], "single");
    }
    if (!Array.isArray(reply)) throw unavailable(resource, "inspect", [new Error("unexpected reply")], "single");
    return this.#counted ? permitView(reply) : lockView(reply[0], reply[1], reply[2]);
  }

  /** SCAN steps on the node (a Cluster: each master), then {@link inspect} of each lock key found. */
  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    return listHeld(this.#listing, prefix, limit);
  }

  /**
   * One script: where the key (a lock) or the set (its member, for permits) still holds
   * `request.token`, puts a fresh token of this locker there with a lease of `request.duration`.
   * The grant queue and the fencing counter are left alone: the adopter's release hands the key
   * on as any release does. A call that fails is undone by a swap back, queued right behind it on
   * the same connection, so the handle stays adoptable and no key is left with a token nobody has
   * (both are sent with the script's body: a flushed script cache cannot reorder them).
   */
  async adopt(request: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const { resource, duration } = request;
    const fresh = ownedToken(this.#tokenPrefix, request.weight);
    return adoptBySwap(request, fresh, this.#settings.driftFactor, this, async (from, to) => {
      const reply = await this.#runner.run(this.#scripts.adopt, [resource], [from, to, duration], true);
      return reply === 1 ? "swapped" : reply === -1 ? "taken" : "expired";
    });
  }

  async acquire({
    resource,
    duration,
    queueing,
    fencing,
    weight,
  }: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    // The token carries the owner, and a holder of several permits its weight (see owner-token.ts).
    const token = ownedToken(this.#tokenPrefix, weight);
    // The lean attempt: a lock that would not join the queue, asks for no fencing token and claims
    // no grant is a plain SET NX — what the script would run, without a script call's cost (nor a
    // look-up of the script's keys). A key without a queue has nothing to join.
    const lean =
      !this.#counted &&
      !fencing &&
      queueing.grantedToken === undefined &&
      (!queueing.joinOnMiss || this.#keys.of(resource).queued === undefined);
    const start = performance.now();
    let reply: unknown;
    try {
      reply = lean
        ? await this.#runner.setIfAbsent(resource, token, duration, start)
        : await this.#runAttemptScript(resource, token, duration, queueing, fencing, start);
    } catch (error) {
      // A node that refuses scripts refused before anything was sent (see ScriptRunner): nothing to undo.
      if (error instanceof UnsupportedError) throw error;
      // The attempt may still run when the node answers again (it timed out here, not there):
      // queue a compare-and-delete with its token right behind it, so it cannot leave a lock that
      // nobody owns for a whole expiry. Same connection, so Redis runs it after the attempt; sent
      // with the script's body, so a flushed script cache cannot make it fail or overtake.
      void this.release(new contract.LockHandle(token, resource, 0, 0), true);
      throw unavailable(resource, "acquire", [error], "single");
    }
    if (lean) {
      if (reply === null) return { kind: "held" };
    } else if (reply !== 0 && reply !== ACQUIRED_CONTENDED && typeof reply !== "string") {
      const [left, registeredMs] = Array.isArray(reply) ? reply : [];
      const retryAfterMs = typeof left === "number" ? left : 1;
      if (typeof registeredMs !== "number" || registeredMs <= 0) return { kind: "held", retryAfterMs };
      return { kind: "held", retryAfterMs, registration: { token, weight, sentAt: start, serverMs: registeredMs } };
    }
    const handle = leaseHandle(token, resource, start, duration, this.#settings.driftFactor);
    if (reply === ACQUIRED_CONTENDED && !lean) handle.contended = true;
    if (ranOutOnArrival(handle, this)) return { kind: "expired-on-arrival" };
    return typeof reply === "string" && !lean
      ? { kind: "acquired", handle, fencingToken: BigInt(reply) }
      : { kind: "acquired", handle };
  }

  /** The attempt script ({@link acquire} when it is not lean), sent at `now`: its reply. */
  #runAttemptScript(
    resource: string,
    token: string,
    duration: number,
    queueing: contract.Queueing,
    fencing: boolean,
    now: number,
  ): Promise<unknown> {
    const keySet = this.#keys.of(resource);
    const queued = keySet.queued !== undefined;
    // Without queue keys (a Cluster key with "}" but no hash tag) fencing was refused up front.
    const keys = !queued ? keySet.plain : fencing ? this.#keys.fenced(keySet) : (keySet.queued as string[]);
    const waiterId = queued ? queueing.waiterId : "";
    return this.#runner.run(
      this.#scripts.acquire,
      keys,
      this.#counted
        ? acquirePermitsArguments(token, duration, waiterId, queueing, this.#permitSettings)
        : [
            token,
            duration,
            waiterId,
            queueing.joinOnMiss ? "join" : "",
            queueing.leaveOnSuccess ? "leave" : "keep",
            this.#settings.livenessWindow,
            queueing.grantedToken ?? "",
            FENCING_COUNTER_TTL_MS,
            this.#settings.grantChannel,
          ],
      false,
      now,
    );
  }

  extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    return this.#extension.extend(handles, duration);
  }

  release(handle: contract.LockHandle, ordered = false): Promise<ReleaseOutcome> {
    const now = performance.now();
    const keySet = this.#keys.of(handle.resource);
    // Permits still valid here (so not past their deadline in Redis: see validity.ts) are released
    // without a script where nobody is queued (see the marks in permit-scripts.ts). The promise
    // is returned as it is: no async frame around it.
    if (this.#counted && keySet.queued !== undefined && now < handle.validUntil) {
      return this.#releases.permits(handle, keySet.queued, ordered, now);
    }
    return this.#releases.byScript(handle, keySet.queued ?? keySet.plain, ordered, now);
  }

  grantedHandle(resource: string, registration: contract.Registration, grantedServerMs: number): contract.LockHandle {
    // The registration ran no earlier than it was sent; the grant ran (grantedServerMs −
    // registration.serverMs) node milliseconds after it. Both are whole ms: 1 ms of slack.
    const { grantGrace, driftFactor } = this.#settings;
    const validFrom = registration.sentAt + (grantedServerMs - registration.serverMs) - 1;
    return leaseHandle(registration.token, resource, validFrom, grantGrace, driftFactor);
  }

  async leaveQueue(resource: string, waiterId: string, grantedToken = ""): Promise<void> {
    const keys = this.#keys.of(resource).queued;
    if (keys === undefined) return;
    // Order matters (a release sent after it must not grant the key to a waiter that left): sent
    // with the script's body, so a flushed script cache cannot let a later command overtake it.
    await this.#runner
      .run(
        this.#scripts.leaveQueue,
        keys,
        [waiterId, grantedToken, this.#settings.grantGrace, ...this.#limitArgs],
        true,
      )
      .catch(() => undefined);
  }

  checkFencing(resource: string): void {
    fencingCounterKey(resource, this.#cluster);
  }

  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const counter = fencingCounterKey(handle.resource, this.#cluster);
    let reply: unknown;
    try {
      reply = await this.#runner.run(
        this.#scripts.issueFencingToken,
        [handle.resource, counter],
        [handle.token, FENCING_COUNTER_TTL_MS],
      );
    } catch (error) {
      throw unavailable(handle.resource, "fencing token", [error], "single");
    }
    return typeof reply === "string" ? BigInt(reply) : undefined;
  }
}
