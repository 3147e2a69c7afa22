import { performance } from "node:perf_hooks";
import type {
  AdoptRequest,
  AttemptOutcome,
  AttemptRequest,
  Backend,
  Capabilities,
  ExtendOutcome,
  Fencing,
  HandOff,
  ListedResource,
  Listing,
  Naming,
  Queueing,
  Registration,
  ReleaseWatcher,
  StoredHolder,
  StoredView,
  WaitQueue,
} from "../core/backend.js";
import { LockHandle } from "../core/backend.js";
import { UnsupportedError } from "../errors.js";
import { toUnknown } from "../internal/release-func.js";
import type { ReleaseOutcome } from "../locker.js";
import { connectionOf } from "./client/connection-of.js";
import { FENCING_COUNTER_TTL_MS, fencingCounterKey } from "./fencing.js";
import { companionKey, hashTagOf } from "./keys.js";
import { listHeld, type RedisListing } from "./list-keys.js";
import { ownedToken, ownerOfToken, ownerTokenPrefix, weightOfToken } from "./owner-token.js";
import {
  ACQUIRE_PERMITS,
  ADOPT_PERMITS,
  acquirePermitsArguments,
  EXTEND_PERMITS,
  GRANT_PERMITS,
  HOLDER_MARK,
  INSPECT_PERMITS,
  ISSUE_PERMIT_FENCING_TOKEN,
  LEAVE_PERMIT_QUEUE,
  permitSettings,
  RELEASE_CONTENDED_PERMITS,
  RELEASE_PERMITS,
} from "./permit-scripts.js";
import { type Script, ScriptRunner } from "./script-runner.js";
import {
  ACQUIRE,
  ADOPT,
  EXTEND_MANY,
  EXTEND_MANY_PACKED,
  INSPECT,
  ISSUE_FENCING_TOKEN,
  LEAVE_QUEUE,
  RELEASE,
} from "./scripts.js";
import { unavailable } from "./store-errors.js";
import type { RedisClient } from "./types.js";

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
  readonly watcher: ReleaseWatcher;
}

/** The scripts a store runs: the same KEYS and ARGV for locks and for counted locks. */
interface ScriptSet {
  readonly acquire: Script;
  readonly extendMany: Script;
  readonly release: Script;
  readonly leaveQueue: Script;
  readonly issueFencingToken: Script;
  readonly inspect: Script;
  readonly adopt: Script;
}

const LOCK_SCRIPTS: ScriptSet = {
  acquire: ACQUIRE,
  extendMany: EXTEND_MANY,
  release: RELEASE,
  leaveQueue: LEAVE_QUEUE,
  issueFencingToken: ISSUE_FENCING_TOKEN,
  inspect: INSPECT,
  adopt: ADOPT,
};

const PERMIT_SCRIPTS: ScriptSet = {
  acquire: ACQUIRE_PERMITS,
  extendMany: EXTEND_PERMITS,
  release: RELEASE_PERMITS,
  leaveQueue: LEAVE_PERMIT_QUEUE,
  issueFencingToken: ISSUE_PERMIT_FENCING_TOKEN,
  inspect: INSPECT_PERMITS,
  adopt: ADOPT_PERMITS,
};

/** The KEYS of one resource's scripts (see SingleNodeStore's #keysOf). */
interface KeySet {
  readonly plain: readonly string[];
  /** Lock, grant queue and liveness hash; undefined when the key cannot have companions. */
  readonly queued: readonly string[] | undefined;
  /** `queued` plus the fencing counter, built on first use. */
  fenced: readonly string[] | undefined;
}

/** What ACQUIRE_PERMITS answers for permits taken while waiters may be queued (see LockHandle.contended). */
const ACQUIRED_CONTENDED = 2;

/** The character EXTEND_MANY and EXTEND_PERMITS answer for a key they extended ("1"). */
const EXTENDED = 49;

/** Resources whose KEYS arrays a store keeps. */
const KEY_CACHE_SIZE = 1024;

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
export class SingleNodeStore implements Backend, Naming, WaitQueue, Fencing, HandOff, Listing {
  readonly #runner: ScriptRunner;
  readonly #cluster: boolean;
  readonly #settings: SingleNodeStoreSettings;
  readonly #keyCache = new Map<string, KeySet>();
  readonly #scripts: ScriptSet;
  /** Counted locks (a `limit`): every attempt runs the permit script. */
  readonly #counted: boolean;
  /** The settings argument of counted locks' attempts (see permitSettings; "" for locks). */
  readonly #permitSettings: string;
  /** ARGV appended to release and leave-queue calls of counted locks: limit (none for locks). */
  readonly #limitArgs: readonly number[];
  /** Extension batches may send their keys as one argument (see {@link #packsKeys}): locks on one node. */
  readonly #packsLockKeys: boolean;
  /** What every token of this store starts with: its locker's owner (see owner-token.ts). */
  readonly #tokenPrefix: string;
  readonly watcher: ReleaseWatcher;
  readonly can: Capabilities;
  readonly #listing: RedisListing;

  constructor(client: RedisClient, settings: SingleNodeStoreSettings) {
    const connection = connectionOf(client);
    this.#listing = {
      nodes: () => connection.scanNodes(),
      prefix: settings.prefix,
      cluster: connection.isCluster,
      inspect: (resource) => this.inspect(resource),
      timeoutMs: settings.commandTimeout,
    };
    this.#cluster = connection.isCluster;
    this.#runner = new ScriptRunner(connection, this.#cluster ? "Cluster" : "server", settings.commandTimeout);
    this.#settings = settings;
    this.watcher = settings.watcher;
    this.#counted = settings.limit !== undefined;
    this.#scripts = this.#counted ? PERMIT_SCRIPTS : LOCK_SCRIPTS;
    this.#packsLockKeys = !this.#cluster && !this.#counted;
    this.#permitSettings =
      settings.limit === undefined
        ? ""
        : permitSettings(
            settings.livenessWindow,
            settings.limit,
            settings.grantGrace,
            FENCING_COUNTER_TTL_MS,
            settings.grantChannel,
          );
    this.#limitArgs = settings.limit === undefined ? [] : [settings.limit];
    this.#tokenPrefix = ownerTokenPrefix(settings.owner);
    // A handle names the topology: a lock of one node is not a lock of a Cluster or a quorum.
    this.scope = `redis:${this.#cluster ? "cluster" : "node"}:${settings.prefix}`;
    this.can = { naming: this, permits: true, queue: this, fencing: this, handOff: this, listing: this };
  }

  resourceOf(key: string): string {
    return this.#settings.prefix + key;
  }

  grants(resource: string): boolean {
    return this.#keysOf(resource).queued !== undefined;
  }

  checkPermits(resource: string): void {
    if (this.#settings.limit !== undefined && this.#keysOf(resource).queued === undefined) {
      throw new UnsupportedError(
        `Semaphores and read-write locks on a Redis Cluster need a key without "}" or with a {hash tag}; received "${resource}"`,
      );
    }
  }

  /** Handles of this store adopt on the same topology (one node, or a Cluster) and prefix. */
  readonly scope: string;

  /**
   * One read-only script: a lock's token and PTTL, or a permit set's live members and deadlines,
   * and the live entries of the key's grant queue (a locker queues once per key for a lock,
   * once per waiting call for permits). The owner and weight come from each token. Fencing
   * tokens are not kept per holder (one counter per key), so holders have none.
   */
  async inspect(resource: string): Promise<StoredView> {
    const keySet = this.#keysOf(resource);
    let reply: unknown;
    try {
      reply = await this.#runner.run(this.#scripts.inspect, keySet.queued ?? keySet.plain, []);
    } catch (error) {
      throw unavailable(resource, "inspect", [error], "single");
    }
    if (!Array.isArray(reply)) throw unavailable(resource, "inspect", [new Error("unexpected reply")], "single");
    if (!this.#counted) {
      const [token, left, waiting] = reply as [unknown, unknown, unknown];
      const holders: StoredHolder[] =
        typeof token === "string" && token !== ""
          ? [{ owner: ownerOfToken(token), weight: 1, expiresInMs: timeLeft(left) }]
          : [];
      return { holders, waiting: Number(waiting) || 0 };
    }
    const [now, waiting, ...entries] = reply as unknown[];
    const holders: StoredHolder[] = [];
    for (let index = 0; index + 1 < entries.length; index += 2) {
      const member = String(entries[index]);
      const expiresInMs = Math.max(0, Number(entries[index + 1]) - Number(now));
      holders.push({ owner: ownerOfToken(member), weight: weightOfToken(member), expiresInMs });
    }
    return { holders, waiting: Number(waiting) || 0 };
  }

  /** SCAN steps on the node (a Cluster: each master), then {@link inspect} of each lock key found. */
  list(prefix: string, limit: number): Promise<ListedResource[]> {
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
  async adopt({ resource, token, weight, duration }: AdoptRequest): Promise<LockHandle | "taken" | "expired"> {
    const fresh = ownedToken(this.#tokenPrefix, weight);
    const start = performance.now();
    let reply: unknown;
    try {
      reply = await this.#runner.run(this.#scripts.adopt, [resource], [token, fresh, duration], true);
    } catch (error) {
      if (error instanceof UnsupportedError) throw error; // refused: nothing was swapped
      this.#runner.run(this.#scripts.adopt, [resource], [fresh, token, duration], true).catch(() => undefined);
      throw unavailable(resource, "adopt", [error], "single");
    }
    if (reply === -1) return "taken";
    if (reply !== 1) return "expired";
    const handle = new LockHandle(fresh, resource, start, start + duration - this.#drift(duration));
    if (performance.now() >= handle.validUntil) {
      void this.release(handle);
      return "expired";
    }
    return handle;
  }

  async acquire({ resource, duration, queueing, fencing, weight }: AttemptRequest): Promise<AttemptOutcome> {
    // The token carries the owner, and a holder of several permits its weight (see owner-token.ts).
    const token = ownedToken(this.#tokenPrefix, weight);
    // The lean attempt: a lock that would not join the queue, asks for no fencing token and claims
    // no grant is a plain SET NX — what the script would run, without a script call's cost (nor a
    // look-up of the script's keys). A key without a queue has nothing to join.
    const lean =
      !this.#counted &&
      !fencing &&
      queueing.grantedToken === undefined &&
      (!queueing.joinOnMiss || this.#keysOf(resource).queued === undefined);
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
      void this.release(new LockHandle(token, resource, 0, 0), true);
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
    const handle = new LockHandle(token, resource, start, start + duration - this.#drift(duration));
    if (reply === ACQUIRED_CONTENDED && !lean) handle.contended = true;
    if (performance.now() >= handle.validUntil) {
      void this.release(handle);
      return { kind: "expired-on-arrival" };
    }
    return typeof reply === "string" && !lean
      ? { kind: "acquired", handle, fencingToken: BigInt(reply) }
      : { kind: "acquired", handle };
  }

  /** The attempt script ({@link acquire} when it is not lean), sent at `now`: its reply. */
  #runAttemptScript(
    resource: string,
    token: string,
    duration: number,
    queueing: Queueing,
    fencing: boolean,
    now: number,
  ): Promise<unknown> {
    const keySet = this.#keysOf(resource);
    const queued = keySet.queued !== undefined;
    // Without queue keys (a Cluster key with "}" but no hash tag) fencing was refused up front.
    const keys = !queued ? keySet.plain : fencing ? this.#fencedKeys(keySet) : (keySet.queued as string[]);
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

  async extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    // Sized once (a round of 100,000 locks makes hundreds of these): no copies as it grows.
    const outcomes = new Array<ExtendOutcome>(handles.length).fill("expired");
    const now = performance.now();
    if (!this.#cluster) {
      await this.#extendGroup(handles, undefined, duration, now, outcomes);
      return outcomes;
    }
    // On a Cluster a script may only touch one slot: keys that share a hash tag go together.
    const groups = new Map<string, number[]>();
    for (let index = 0; index < handles.length; index++) {
      const resource = (handles[index] as LockHandle).resource;
      const group = hashTagOf(resource) ?? resource;
      const members = groups.get(group);
      if (members === undefined) groups.set(group, [index]);
      else members.push(index);
    }
    if (groups.size === 1) await this.#extendGroup(handles, undefined, duration, now, outcomes);
    else {
      await Promise.all(
        Array.from(groups.values(), (indexes) => this.#extendGroup(handles, indexes, duration, now, outcomes)),
      );
    }
    return outcomes;
  }

  /**
   * One extension script call for `handles` (those at `indexes`, or all of them) on one node or
   * slot: fills their `outcomes` (which start as "expired"). A handle whose validity ran out by
   * `now` stays "expired" and is not sent. The tokens go as one space-separated argument and the
   * answer is one character per key (see EXTEND_MANY): 2 arguments and one string per lock fewer
   * to build, send and parse than a token and a number each. On one node the keys go as one
   * argument too (see {@link #packsKeys}): the client then builds, measures and copies three
   * arguments per batch instead of one per lock (docs/benchmarks.md, "What each speed choice buys").
   */
  async #extendGroup(
    handles: readonly LockHandle[],
    indexes: readonly number[] | undefined,
    duration: number,
    now: number,
    outcomes: ExtendOutcome[],
  ): Promise<void> {
    const count = indexes === undefined ? handles.length : indexes.length;
    // Sized for every lock of the batch, then cut to those sent: no copies as they fill.
    const keys = new Array<string>(count);
    const tokens = new Array<string>(count);
    let filled = 0;
    for (let position = 0; position < count; position++) {
      const index = indexes === undefined ? position : (indexes[position] as number);
      const handle = handles[index] as LockHandle;
      if (now >= handle.validUntil) continue; // "expired": nothing is sent
      keys[filled] = handle.resource;
      tokens[filled] = handle.token;
      filled += 1;
      outcomes[index] = "taken"; // until the answer says otherwise
    }
    if (filled === 0) return;
    keys.length = filled;
    tokens.length = filled;
    const start = performance.now();
    let replies: unknown;
    try {
      const tokenList = tokens.join(" ");
      replies = await (this.#packsKeys(keys)
        ? this.#runner.run(EXTEND_MANY_PACKED, [], [duration, tokenList, keys.join("\0")])
        : this.#runner.run(this.#scripts.extendMany, keys, [duration, tokenList]));
    } catch (error) {
      const failure = unavailable(keys[0] as string, "extend", [error], "single");
      for (let position = 0; position < count; position++) {
        const index = indexes === undefined ? position : (indexes[position] as number);
        if (outcomes[index] === "taken") outcomes[index] = failure;
      }
      return;
    }
    const answers = typeof replies === "string" ? replies : "";
    const validUntil = start + duration - this.#drift(duration);
    let sent = 0;
    for (let position = 0; position < count; position++) {
      const index = indexes === undefined ? position : (indexes[position] as number);
      if (outcomes[index] !== "taken") continue;
      if (answers.charCodeAt(sent) === EXTENDED) {
        (handles[index] as LockHandle).renew(start, validUntil);
        outcomes[index] = "extended";
      }
      sent += 1;
    }
  }

  release(handle: LockHandle, ordered = false): Promise<ReleaseOutcome> {
    const now = performance.now();
    const keySet = this.#keysOf(handle.resource);
    // The lean release of permits still valid here (so not past their deadline in Redis: see
    // #drift): one ZREM, no script (see the marks in permit-scripts.ts). Its promise is returned as
    // it is: no async frame around it.
    if (this.#counted && keySet.queued !== undefined && now < handle.validUntil) {
      return handle.contended
        ? this.#releaseContended(handle, keySet.queued, ordered, now)
        : this.#releasePermits(handle, keySet.queued, ordered, now);
    }
    return this.#releaseByScript(handle, keySet, ordered, now);
  }

  /**
   * The release script: a lock's, or permits that may have run out (see RELEASE_PERMITS). A
   * reaction rather than an async frame: the caller hears the outcome one microtask sooner.
   */
  #releaseByScript(handle: LockHandle, keySet: KeySet, ordered: boolean, now: number): Promise<ReleaseOutcome> {
    let sent: Promise<unknown>;
    try {
      sent = this.#runner.run(
        this.#scripts.release,
        keySet.queued ?? keySet.plain,
        this.#limitArgs.length === 0
          ? [handle.token, this.#settings.grantGrace]
          : [handle.token, this.#settings.grantGrace, ...this.#limitArgs],
        ordered,
        now,
      );
    } catch {
      return Promise.resolve("unknown");
    }
    return sent.then((reply) => releaseOutcomeOf(handle, reply), toUnknown);
  }

  /**
   * Removes a valid holder and its mark in one ZREM. Removing both means someone may be queued:
   * GRANT_PERMITS then grants the freed permits (a waiter that retries first may take them
   * itself; a newcomer cannot, the queue mark stops it).
   */
  async #releasePermits(
    handle: LockHandle,
    keys: readonly string[],
    ordered: boolean,
    now: number,
  ): Promise<ReleaseOutcome> {
    let removed: unknown;
    try {
      removed = await this.#runner.removeMembers(handle.resource, handle.token, HOLDER_MARK + handle.token, now);
    } catch {
      return "unknown";
    }
    if (removed !== 1 && removed !== 2) return "expired";
    handle.grantedTo = "";
    if (removed === 2) {
      try {
        const first = await this.#runner.run(
          GRANT_PERMITS,
          keys,
          [this.#settings.grantGrace, ...this.#limitArgs],
          ordered,
        );
        if (typeof first === "string") handle.grantedTo = first;
      } catch {
        // The permits are free: queued waiters take them at their next attempt.
      }
    }
    return "released";
  }

  /**
   * The release of valid permits with waiters possibly queued (see {@link LockHandle.contended}):
   * {@link #releasePermits} in one round trip (RELEASE_CONTENDED_PERMITS), so the next waiter's
   * grant is published by the release's own command.
   */
  async #releaseContended(
    handle: LockHandle,
    keys: readonly string[],
    ordered: boolean,
    now: number,
  ): Promise<ReleaseOutcome> {
    let reply: unknown;
    try {
      reply = await this.#runner.run(
        RELEASE_CONTENDED_PERMITS,
        keys,
        [handle.token, this.#settings.grantGrace, ...this.#limitArgs],
        ordered,
        now,
      );
    } catch {
      return "unknown";
    }
    const [removed, first] = Array.isArray(reply) ? reply : [];
    if (removed !== 1 && removed !== 2) return "expired";
    handle.grantedTo = typeof first === "string" ? first : "";
    return "released";
  }

  grantedHandle(resource: string, registration: Registration, grantedServerMs: number): LockHandle {
    // The registration ran no earlier than it was sent; the grant ran (grantedServerMs −
    // registration.serverMs) node milliseconds after it. Both are whole ms: 1 ms of slack.
    const grace = this.#settings.grantGrace;
    const validFrom = registration.sentAt + (grantedServerMs - registration.serverMs) - 1;
    return new LockHandle(registration.token, resource, validFrom, validFrom + grace - this.#drift(grace));
  }

  async leaveQueue(resource: string, waiterId: string, grantedToken = ""): Promise<void> {
    const keys = this.#keysOf(resource).queued;
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

  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
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

  /**
   * The KEYS arrays of `resource`'s scripts, built once and cached (at most {@link KEY_CACHE_SIZE}
   * resources; the cache starts afresh when full): a hot key costs a map hit, not three string
   * concatenations per call. The arrays are shared: never mutate them.
   */
  #keysOf(resource: string): KeySet {
    let keySet = this.#keyCache.get(resource);
    if (keySet === undefined) {
      const queue = companionKey(resource, "queue", this.#cluster);
      const liveness = companionKey(resource, "waiters", this.#cluster);
      keySet = {
        plain: [resource],
        queued: queue === undefined || liveness === undefined ? undefined : [resource, queue, liveness],
        fenced: undefined,
      };
      if (this.#keyCache.size >= KEY_CACHE_SIZE) this.#keyCache.clear();
      this.#keyCache.set(resource, keySet);
    }
    return keySet;
  }

  #fencedKeys(keySet: KeySet): readonly string[] {
    const queued = keySet.queued as readonly string[];
    keySet.fenced ??= [...queued, fencingCounterKey(queued[0] as string, this.#cluster)];
    return keySet.fenced;
  }

  /**
   * Whether an extension of `keys` goes as one argument (EXTEND_MANY_PACKED): a lock's keys on one
   * node, none holding a NUL byte (the separator). A Cluster routes a script by its declared keys,
   * so there they stay declared; a standalone node lets a script touch keys it was not given, as
   * it always has for scripts without flags. Permits keep their own extension script.
   */
  #packsKeys(keys: readonly string[]): boolean {
    if (!this.#packsLockKeys) return false;
    for (const key of keys) if (key.includes("\0")) return false;
    return true;
  }

  #drift(duration: number): number {
    // Redis expires keys with 1 ms precision; the same 2 ms redlock adds.
    return Math.round(this.#settings.driftFactor * duration) + 2;
  }
}

/**
 * What a release script's `reply` says (see RELEASE): a bare code when it granted the key to
 * nobody, else the code and the grantee, recorded on `handle`.
 */
function releaseOutcomeOf(handle: LockHandle, reply: unknown): ReleaseOutcome {
  let code = reply;
  let chosen: unknown = "";
  if (Array.isArray(reply)) [code, chosen] = reply;
  handle.grantedTo = typeof chosen === "string" ? chosen : undefined;
  return code === 1 ? "released" : code === -1 ? "taken" : "expired";
}

/** A PTTL as time left: a key without a TTL (-1) never expires on its own. */
function timeLeft(pttl: unknown): number {
  const left = Number(pttl);
  return left === -1 ? Number.POSITIVE_INFINITY : Math.max(0, left);
}
