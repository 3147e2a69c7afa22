import { performance } from "node:perf_hooks";
import type {
  AdoptRequest,
  AttemptOutcome,
  AttemptRequest,
  Backend,
  BackendContext,
  BackendEvents,
  BackendFactory,
  Capabilities,
  ExtendOutcome,
  Fencing,
  HandOff,
  ListedResource,
  Listing,
  Naming,
  StoredHolder,
  StoredView,
  WaitQueue,
} from "../core/backend.js";
import { LockHandle } from "../core/backend.js";
import { StoreUnavailableError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { mapBounded } from "../internal/list-options.js";
import type { ReleaseOutcome } from "../locker.js";
import { HeldWatch } from "./held-watch.js";
import {
  directoryOf,
  type Entry,
  entryKey,
  entryValue,
  freshToken,
  type KeyDirectory,
  keyOfEntry,
  parseEntry,
  slotOf,
} from "./layout.js";
import { boundOf, type HeldEntry, isLeaseGone, type LeaseRecord, Leases, timedOut } from "./leases.js";
import type { ResolvedEtcdLockerOptions } from "./options.js";
import type {
  EtcdClient,
  EtcdKeyValue,
  EtcdRangeRequest,
  EtcdRangeResponse,
  EtcdTxnRequest,
  EtcdTxnResponse,
} from "./types.js";
import { EtcdReleaseWatcher } from "./watcher.js";

/** Optimistic rounds of a counted attempt that fits before it gives up as "held" (see #fitAtBack). */
const FIT_ROUNDS = 3;

/**
 * An entry found holding: its lease, key and value, its token, when the attempt was sent, its
 * create revision (the fencing token) and a revision at which etcd had it.
 */
interface Granted {
  readonly record: LeaseRecord;
  readonly key: Buffer;
  readonly value: Buffer;
  readonly token: string;
  readonly sentAt: number;
  readonly created: string;
  readonly seenAt: string;
}

/** A counted waiter's entry in a key's queue (its registration), until it holds or leaves. */
interface Queued {
  readonly key: Buffer;
  readonly value: Buffer;
  readonly record: LeaseRecord;
  readonly weight: number;
}

/**
 * The backend of the etcd lockers (see `EtcdLocker` for the whole picture):
 *
 * - One etcd lease per lease length (in practice one per locker), granted lazily and kept alive
 *   by one keepalive per extension batch: it extends every lock on it.
 * - A holder is an etcd key in the key's directory, attached to the lease, its value the token,
 *   weight and owner. Waiters queue as entries too (etcd's own lock recipe): in create-revision
 *   order, an entry holds when the weights ahead of it plus its own fit the limit — 1 for a lock,
 *   so a lock's waiters are served in arrival order across processes, and a release lets exactly
 *   the next one in.
 * - An attempt that joins the queue leaves its entry (its registration) until it holds or leaves;
 *   one that does not join (`tryLock`, `tryAcquire`) leaves nothing. Releases are heard as
 *   deletes of the directory (see {@link EtcdReleaseWatcher}): the core wakes its waiters, which
 *   read where their entry stands (a read, not a write: no WAL sync).
 * - A holder watches its directory too (see {@link HeldWatch}): its own entry deleted — by hand,
 *   or with every key of its lease when the lease is revoked — is a loss at once, not at the next
 *   keepalive (which is still the safety net).
 * - Fencing tokens are the entry's create revision (raft-ordered: monotonic across failovers).
 * - A lock lives as long as its lease: `expires` is false, so a lease the core gives up on (its
 *   deadline passed, `autoExtend: false`) is deleted by the core's release.
 *
 * @param limit permits per key: 1 for a lock.
 */
export function etcdBackend(client: EtcdClient, options: ResolvedEtcdLockerOptions, limit: number): BackendFactory {
  return (context) => new EtcdBackend(client, options, context, limit);
}

class EtcdBackend implements Backend, Naming, WaitQueue, Fencing, HandOff, Listing {
  readonly can: Capabilities = {
    naming: this,
    permits: true,
    heldUntilReleased: true,
    queue: this,
    fencing: this,
    handOff: this,
    listing: this,
  };
  readonly watcher: EtcdReleaseWatcher;
  /** Handles adopt under the same prefix. */
  readonly scope: string;
  readonly #client: EtcdClient;
  readonly #options: ResolvedEtcdLockerOptions;
  readonly #events: BackendEvents;
  readonly #limit: number;
  readonly #owner: string;
  readonly #leases: Leases;
  /** Held entries, by token (until released, lost or handed off). */
  readonly #held = new Map<string, HeldEntry>();
  /** Listens for the deletes of held entries. */
  readonly #heldWatch: HeldWatch;
  /** Counted waiters' entries, by registration token. */
  readonly #queued = new Map<string, Queued>();
  /** The latest join of each key's queue sent (see #attemptCounted). */
  readonly #joining = new Map<string, Promise<void>>();
  /** Bounds every command by the operation timeout of etcd's silence. */
  readonly #deadlines: DeadlineGroup;
  /** Clean-ups of attempts that failed or timed out (close waits for them). */
  readonly #cleanUps = new Set<Promise<unknown>>();
  /** Set by close: background deletions stop retrying. */
  #closing = false;

  constructor(client: EtcdClient, options: ResolvedEtcdLockerOptions, context: BackendContext, limit: number) {
    this.#client = client;
    this.#options = options;
    this.#events = context.events;
    this.#limit = limit;
    this.#owner = context.owner;
    this.scope = `etcd:${options.prefix}`;
    this.#deadlines = new DeadlineGroup(options.operationTimeout, { inOrder: false });
    this.#leases = new Leases({
      create: (ttl) => client.lease(ttl, { autoKeepAlive: false }),
      timeoutMs: options.operationTimeout,
      bound: (command) => this.#bound(command),
      unavailable: (resource, error) => unavailable(resource, error),
      lost: (record, cause) => {
        if (record.tokens.size > 0) this.#events.lost(new Set(record.tokens), "expired", cause);
      },
    });
    const namespaceLength = client.prefix.length;
    this.watcher = new EtcdReleaseWatcher(
      {
        client,
        directoryOf: (resource) => this.#directory(resource).start.subarray(namespaceLength).toString("utf8"),
        keyOf: (resource) => resource.slice(options.prefix.length),
        timeoutMs: options.operationTimeout,
        deleted: (key) => this.#deleted(Buffer.concat([client.prefix, key])),
        onClose: () => this.#close(),
      },
      context.events,
    );
    this.#heldWatch = new HeldWatch({
      watcher: this.watcher,
      unheard: (token, held) => {
        if (!this.#closing) this.#track(this.#check(token, held));
      },
    });
  }

  resourceOf(key: string): string {
    return this.#options.prefix + key;
  }

  /** Waiters queue by entries; a release grants the key to nobody (the next entry's watch fires). */
  grants(): boolean {
    return false;
  }

  #directory(resource: string): KeyDirectory {
    const { prefix } = this.#options;
    return directoryOf(this.#client.prefix, prefix, resource.slice(prefix.length));
  }

  async acquire(request: AttemptRequest): Promise<AttemptOutcome> {
    const ttl = ttlSecondsOf(request.duration);
    let record = await this.#leases.get(ttl, request.resource);
    try {
      return await this.#attempt(request, record);
    } catch (error) {
      if (!isLeaseGone(error)) throw error;
      // etcd expired the lease before this process knew (it was stopped, say): its locks are
      // lost; the attempt goes again on a new lease.
      this.#leases.markDead(record, error);
      record = await this.#leases.get(ttl, request.resource);
      return await this.#attempt(request, record).catch((again: unknown) => {
        throw isLeaseGone(again) ? unavailable(request.resource, again) : again;
      });
    }
  }

  #attempt(request: AttemptRequest, record: LeaseRecord): Promise<AttemptOutcome> {
    return this.#attemptCounted(request, record, this.#limit);
  }

  /**
   * A counted lock: a claim (this waiter's queued entry) holds once the weights ahead of it plus
   * its own fit the limit. A fresh attempt that joins the queue puts its entry behind everybody
   * and holds if it fits, else the entry is its registration; one that does not join leaves
   * nothing (see #tryCounted).
   */
  async #attemptCounted(request: AttemptRequest, record: LeaseRecord, limit: number): Promise<AttemptOutcome> {
    const { resource, queueing, weight } = request;
    const directory = this.#directory(resource);
    const claimed = queueing.grantedToken === undefined ? undefined : this.#queued.get(queueing.grantedToken);
    if (queueing.grantedToken !== undefined && claimed !== undefined) {
      const sentAt = performance.now();
      const { kvs, header } = await this.#range(resource, rangeOf(directory));
      const mine = kvs.find((kv) => kv.key.equals(claimed.key) && kv.value.equals(claimed.value));
      if (mine !== undefined) {
        if (!fits(kvs, mine, limit)) {
          return { kind: "held", registration: { token: queueing.grantedToken, weight, sentAt, serverMs: 0 } };
        }
        this.#queued.delete(queueing.grantedToken);
        const { record, key, value } = claimed;
        const [token, created, seenAt] = [queueing.grantedToken, mine.create_revision, header.revision];
        return this.#granted(request, { record, key, value, token, sentAt, created, seenAt });
      }
      // Its entry is gone (its lease expired): a fresh attempt, at the back.
      this.#queued.delete(queueing.grantedToken);
    }
    const token = freshToken();
    const key = entryKey(directory, token);
    const value = entryValue(token, weight, this.#owner);
    const put = { request_put: { key, value, lease: record.id } };
    if (queueing.joinOnMiss) {
      // etcd's own recipe: put the entry behind everybody and read where it landed, atomically.
      // Joins of one key are sent one at a time: etcd may order concurrent requests either way,
      // and this locker's waiters must queue in the order they came.
      let sentAt = 0;
      const previous = this.#joining.get(resource);
      const joining = (previous ?? Promise.resolve()).then(() => {
        sentAt = performance.now();
        return this.#txn(resource, { success: [put, { request_range: rangeOf(directory) }], cleanUp: { key, value } });
      });
      const settled = joining.then(ignore, ignore);
      this.#joining.set(resource, settled);
      void settled.then(() => {
        if (this.#joining.get(resource) === settled) this.#joining.delete(resource);
      });
      const joined = await joining;
      const kvs = joined.responses[1]?.response_range?.kvs ?? [];
      const mine = kvs.find((kv) => kv.value.equals(value));
      if (mine !== undefined && fits(kvs, mine, limit)) {
        const seenAt = joined.header.revision;
        return this.#granted(request, { record, key, value, token, sentAt, created: mine.create_revision, seenAt });
      }
      this.#queued.set(token, { key, value, record, weight });
      return { kind: "held", registration: { token, weight, sentAt, serverMs: 0 } };
    }
    return this.#tryCounted(request, record, limit, directory, token, key, value);
  }

  /**
   * A counted attempt that does not queue (`tryAcquire`): puts its entry at once on an empty key;
   * otherwise reads the key and takes the permits when everything held and queued plus its weight
   * fits, in a transaction that checks nothing changed since (a few rounds). Leaves nothing behind.
   */
  async #tryCounted(
    request: AttemptRequest,
    record: LeaseRecord,
    limit: number,
    directory: KeyDirectory,
    token: string,
    key: Buffer,
    value: Buffer,
  ): Promise<AttemptOutcome> {
    const { resource, weight } = request;
    const put = { request_put: { key, value, lease: record.id } };
    let sentAt = performance.now();
    let answer = await this.#txn(resource, {
      compare: [{ key: directory.start, range_end: directory.end, target: "Version", result: "Equal", version: 0 }],
      success: [put],
      failure: [{ request_range: rangeOf(directory) }],
      cleanUp: { key, value },
    });
    for (let round = 0; !answer.succeeded && round < FIT_ROUNDS; round++) {
      const kvs = rangeIn(answer);
      // Put by a retried transaction: decided below.
      if (kvs.some((kv) => kv.value.equals(value)) || total(kvs, limit) + weight > limit) break;
      sentAt = performance.now();
      answer = await this.#txn(resource, {
        compare: [
          {
            key: directory.start,
            range_end: directory.end,
            target: "Mod",
            result: "Less",
            mod_revision: String(BigInt(rangeRevision(answer)) + 1n),
          },
        ],
        success: [put],
        failure: [{ request_range: rangeOf(directory) }],
        cleanUp: { key, value },
      });
    }
    if (answer.succeeded) {
      const put = answer.header.revision;
      return this.#granted(request, { record, key, value, token, sentAt, created: put, seenAt: put });
    }
    const own = rangeIn(answer).find((kv) => kv.value.equals(value));
    if (own !== undefined && fits(rangeIn(answer), own, limit)) {
      const seenAt = rangeRevision(answer);
      return this.#granted(request, { record, key, value, token, sentAt, created: own.create_revision, seenAt });
    }
    if (own !== undefined) this.#deleteLater(key, value);
    return { kind: "held" };
  }

  /** The outcome of a grant of `granted`'s entry, fenced by its create revision when asked. */
  #granted(request: AttemptRequest, granted: Granted): AttemptOutcome {
    const { record, key, value, token, sentAt } = granted;
    const { resource } = request;
    const validUntil = Math.min(boundOf(sentAt, request.duration), record.validUntil);
    const handle = this.#hold(token, sentAt, validUntil, { resource, key, value, record }, granted.seenAt);
    if (performance.now() >= validUntil || record.dead) {
      void this.release(handle);
      return { kind: "expired-on-arrival" };
    }
    return request.fencing
      ? { kind: "acquired", handle, fencingToken: BigInt(granted.created) }
      : { kind: "acquired", handle };
  }

  /**
   * Records a held entry, which etcd had at revision `seenAt`, and makes its handle; from now on
   * its delete is a loss (see {@link #deleted}).
   */
  #hold(token: string, sentAt: number, validUntil: number, held: HeldEntry, seenAt: string): LockHandle {
    this.#held.set(token, held);
    held.record.tokens.add(token);
    this.#heldWatch.add(token, held, seenAt, sentAt);
    return new LockHandle(token, held.resource, sentAt, validUntil);
  }

  /** Reads a held entry the watch may have missed the delete of: gone or replaced, it is lost. */
  async #check(token: string, held: HeldEntry): Promise<void> {
    const { kvs } = await this.#range(held.resource, { key: held.key });
    const current = kvs[0];
    if (this.#held.get(token) !== held || current?.value.equals(held.value)) return;
    this.#lose(token, held, current === undefined ? "expired" : "taken");
  }

  /**
   * The watch heard `key` (with the client's namespace) deleted: where it is a held entry, the
   * lock is lost. Not our own release: that forgets its entry before it sends the delete.
   */
  #deleted(key: Buffer): void {
    const token = this.#heldWatch.tokenOf(key);
    const held = token === undefined ? undefined : this.#held.get(token);
    if (token !== undefined && held !== undefined) this.#lose(token, held, "expired");
  }

  /**
   * Reports a held entry lost. One rule, as release and adopt answer: an entry gone is "expired"
   * (its lease was revoked or ran out, or someone deleted it), one holding another value "taken".
   * It is forgotten first, so the core's release of the lost lock sends nothing.
   */
  #lose(token: string, held: HeldEntry, reason: "taken" | "expired"): void {
    this.#forget(token, held);
    held.record.tokens.delete(token);
    this.#events.lost(new Set([token]), reason, new EntryLostError(held.key, reason));
  }

  /** Stops keeping `held` (released, lost or handed off): no longer held here, nor watched for it. */
  #forget(token: string, held: HeldEntry): void {
    this.#held.delete(token);
    this.#heldWatch.remove(token, held);
  }

  /**
   * One keepalive per lease of the batch (shared with any in flight): it extends every entry on
   * the lease. A lease etcd no longer has loses every lock on it ("expired").
   */
  async extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    const now = performance.now();
    const byRecord = new Map<LeaseRecord, number[]>();
    const outcomes: ExtendOutcome[] = [];
    for (let index = 0; index < handles.length; index++) {
      const handle = handles[index] as LockHandle;
      const held = this.#held.get(handle.token);
      outcomes.push(held === undefined ? "taken" : "expired");
      if (held === undefined || now >= handle.validUntil) continue;
      const indexes = byRecord.get(held.record);
      if (indexes === undefined) byRecord.set(held.record, [index]);
      else indexes.push(index);
    }
    await Promise.all(
      Array.from(byRecord, async ([record, indexes]) => {
        let outcome: ExtendOutcome;
        try {
          const sentAt = await this.#leases.keepAlive(record);
          for (const index of indexes) {
            const handle = handles[index] as LockHandle;
            const validUntil = Math.min(boundOf(sentAt, duration), record.validUntil);
            if (validUntil > handle.validUntil) handle.renew(sentAt, validUntil);
            outcomes[index] = "extended";
          }
          return;
        } catch (error) {
          outcome = isLeaseGone(error) ? "expired" : unavailable(handles[indexes[0] ?? 0]?.resource ?? "", error);
        }
        for (const index of indexes) outcomes[index] = outcome;
      }),
    );
    return outcomes;
  }

  /** Deletes the entry if it is still ours (compare-and-delete). Never rejects. */
  async release(handle: LockHandle): Promise<ReleaseOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return "expired";
    this.#forget(handle.token, held);
    const { key, value, record } = held;
    record.tokens.delete(handle.token);
    try {
      const answer = await this.#txn(handle.resource, {
        compare: [{ key, target: "Value", result: "Equal", value }],
        success: [{ request_delete_range: { key } }],
        failure: [{ request_range: { key } }],
      });
      if (answer.succeeded) return performance.now() >= handle.validUntil ? "expired" : "released";
      return rangeIn(answer).length > 0 ? "taken" : "expired";
    } catch {
      // The entry may still be there, on a lease this locker keeps alive for its other locks: it
      // would never run out. Delete it once etcd answers again (say, after an election).
      this.#retryDelete(key, value);
      return "unknown";
    }
  }

  /**
   * Deletes `key` if it still holds `value`, retrying with a growing delay (50 ms to 1 s) until
   * etcd answers, or until the locker closes (its leases then run out, and the entry with them).
   */
  #retryDelete(key: Buffer, value: Buffer): void {
    this.#track(
      (async () => {
        for (let delay = 50; !this.#closing; delay = Math.min(2 * delay, 1000)) {
          await new Promise((resolve) => setTimeout(resolve, delay).unref());
          if (this.#closing) return;
          try {
            await this.#deleteIfOurs(key, value);
            return;
          } catch {
            // etcd still unreachable: try again.
          }
        }
      })(),
    );
  }

  async leaveQueue(_resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken === undefined) return;
    const queued = this.#queued.get(grantedToken);
    if (queued === undefined) return;
    this.#queued.delete(grantedToken);
    await this.#deleteIfOurs(queued.key, queued.value).catch(() => undefined);
  }

  /** The fencing token of a held lock: its entry's create revision (read back). */
  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return undefined;
    const { kvs } = await this.#range(handle.resource, { key: held.key });
    const entry = kvs[0];
    return entry?.value.equals(held.value) ? BigInt(entry.create_revision) : undefined;
  }

  /**
   * Who holds `resource` and who waits (one range read, plus one `LeaseTimeToLive` per other
   * locker's lease among the holders).
   */
  async inspect(resource: string): Promise<StoredView> {
    const limit = this.#limit;
    const { kvs } = await this.#range(resource, rangeOf(this.#directory(resource)));
    const now = performance.now();
    const holders: Array<{ kv: EtcdKeyValue; entry: Entry }> = [];
    let used = 0;
    for (const kv of kvs) {
      const entry = parseEntry(kv.value, limit);
      if (used + entry.weight > limit) break;
      used += entry.weight;
      holders.push({ kv, entry });
    }
    const ttls = new Map<string, Promise<number>>();
    for (const { kv } of holders) {
      if (ttls.has(kv.lease)) continue;
      const own = this.#leases.find(kv.lease);
      ttls.set(
        kv.lease,
        own !== undefined
          ? Promise.resolve(Math.max(0, own.validUntil - now))
          : this.#call(resource, (options) => this.#client.leaseClient.leaseTimeToLive({ ID: kv.lease }, options)).then(
              (answer) => Math.max(0, Number(answer.TTL) * 1000),
            ),
      );
    }
    const result: StoredHolder[] = [];
    for (const { kv, entry } of holders) {
      result.push({
        owner: entry.owner,
        weight: entry.weight,
        expiresInMs: await (ttls.get(kv.lease) as Promise<number>),
        fencingToken: BigInt(kv.create_revision),
      });
    }
    return { holders: result, waiting: kvs.length - holders.length };
  }

  /**
   * Held keys under the locker's prefix: range reads of the prefix, keys only, at most
   * {@link LIST_PAGE} etcd keys each, each page starting past the directory of the last key seen
   * (its other entries are skipped), until `limit` keys that start with `prefix` are named; then
   * each is inspected (at most {@link LIST_CONCURRENCY} at once) and those held are kept.
   */
  async list(prefix: string, limit: number): Promise<ListedResource[]> {
    const base = Buffer.concat([this.#client.prefix, Buffer.from(this.#options.prefix, "utf8")]);
    const rangeEnd = prefixEnd(base);
    const keys: string[] = [];
    let start: Buffer = base;
    while (keys.length < limit) {
      const { kvs } = await this.#range(this.#options.prefix, {
        key: start,
        range_end: rangeEnd,
        limit: LIST_PAGE,
        keys_only: true,
      });
      let next: Buffer | undefined;
      for (const { key: name } of kvs) {
        if (next !== undefined && Buffer.compare(name, next) < 0) continue;
        const key = keyOfEntry(name.subarray(base.length));
        if (key === undefined) {
          next = Buffer.concat([name, ZERO]);
          continue;
        }
        next = this.#directory(this.resourceOf(key)).end;
        if (key.startsWith(prefix)) keys.push(key);
        if (keys.length >= limit) break;
      }
      if (kvs.length < LIST_PAGE || next === undefined) break;
      start = next;
    }
    const views = await mapBounded(keys, LIST_CONCURRENCY, (key) => this.inspect(this.resourceOf(key)));
    const listed: ListedResource[] = [];
    keys.forEach((key, index) => {
      const view = views[index] as StoredView;
      if (view.holders.length > 0) listed.push({ key, view });
    });
    return listed;
  }

  /**
   * Takes over a handed-off entry: where it still holds the handed token, puts it again (same
   * key: same create revision, so the same fencing token) with a fresh token and this locker's
   * lease, in a transaction that checks it was not changed since it was read.
   */
  async adopt(request: AdoptRequest): Promise<LockHandle | "taken" | "expired"> {
    const { resource, token, weight, duration } = request;
    const slot = slotOf(token);
    if (slot === undefined) return "taken";
    const directory = this.#directory(resource);
    const key = entryKey(directory, token);
    const record = await this.#leases.get(ttlSecondsOf(duration), resource);
    const { kvs } = await this.#range(resource, { key });
    const current = kvs[0];
    if (current === undefined) return "expired";
    if (parseEntry(current.value, this.#limit).token !== token) return "taken";
    const fresh = freshToken(slot);
    const value = entryValue(fresh, weight, this.#owner);
    const sentAt = performance.now();
    const answer = await this.#txn(resource, {
      compare: [{ key, target: "Mod", result: "Equal", mod_revision: current.mod_revision }],
      success: [{ request_put: { key, value, lease: record.id } }],
      failure: [{ request_range: { key } }],
    });
    if (!answer.succeeded) return rangeIn(answer).length > 0 ? "taken" : "expired";
    const validUntil = Math.min(boundOf(sentAt, duration), record.validUntil);
    return this.#hold(fresh, sentAt, validUntil, { resource, key, value, record }, answer.header.revision);
  }

  /**
   * A hand-off: extends the lease once, as an extension would, then forgets the entry here (no
   * longer ours to watch or release). Its token stays on the lease's list: close must not revoke
   * the lease under an entry that waits for its adopter.
   */
  async detach(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const [outcome = "taken"] = await this.extend([handle], duration);
    const held = this.#held.get(handle.token);
    if (outcome === "extended" && held !== undefined) this.#forget(handle.token, held);
    return outcome;
  }

  /** Runs a transaction within the operation timeout; a failure is a StoreUnavailableError. */
  async #txn(
    resource: string,
    request: EtcdTxnRequest & { cleanUp?: { key: Buffer; value: Buffer } },
  ): Promise<EtcdTxnResponse> {
    const { cleanUp, ...txn } = request;
    const sending = this.#client.kv.txn(txn, this.#callOptions());
    try {
      return await this.#bound(sending);
    } catch (error) {
      // An attempt whose answer never came may still have put its entry: delete it once it settles.
      if (cleanUp !== undefined) {
        this.#track(sending.catch(() => undefined).then(() => this.#deleteIfOurs(cleanUp.key, cleanUp.value)));
      }
      if (isLeaseGone(error)) throw error;
      throw unavailable(resource, error);
    }
  }

  #range(resource: string, range: EtcdRangeRequest): Promise<EtcdRangeResponse> {
    return this.#call(resource, (options) => this.#client.kv.range(range, options));
  }

  async #call<T>(resource: string, send: (options: { deadline: number }) => Promise<T>): Promise<T> {
    try {
      return await this.#bound(send(this.#callOptions()));
    } catch (error) {
      throw unavailable(resource, error);
    }
  }

  /** Bounds `command` by the operation timeout (of etcd's silence, not this process's stalls). */
  #bound<T>(command: Promise<T>): Promise<T> {
    return this.#deadlines.run(command, () => timedOut(this.#options.operationTimeout));
  }

  /** gRPC's own deadline, a little past ours: the call ends on etcd's side too. */
  #callOptions(): { deadline: number } {
    return { deadline: Date.now() + 2 * this.#options.operationTimeout };
  }

  /** Deletes `key` if it still holds `value`; rejects on a store failure. */
  async #deleteIfOurs(key: Buffer, value: Buffer): Promise<void> {
    await this.#bound(
      this.#client.kv.txn(
        { compare: [{ key, target: "Value", result: "Equal", value }], success: [{ request_delete_range: { key } }] },
        this.#callOptions(),
      ),
    );
  }

  #deleteLater(key: Buffer, value: Buffer): void {
    this.#track(this.#deleteIfOurs(key, value));
  }

  #track(operation: Promise<unknown>): void {
    const tracked = operation.catch(() => undefined).finally(() => this.#cleanUps.delete(tracked));
    this.#cleanUps.add(tracked);
  }

  async #close(): Promise<void> {
    this.#closing = true;
    this.#heldWatch.close();
    while (this.#cleanUps.size > 0) await Promise.all(this.#cleanUps);
    // Waiters' entries are left (their waits were rejected): delete them; held entries stay.
    await Promise.allSettled(
      Array.from(this.#queued.values(), (queued) => this.#deleteIfOurs(queued.key, queued.value)),
    );
    this.#queued.clear();
    await this.#leases.close();
  }
}

/** The lease TTL, in whole seconds, of a lease of `duration` ms. */
function ttlSecondsOf(duration: number): number {
  return Math.max(1, Math.ceil(duration / 1000));
}

/** The range request of a key's directory, oldest entry first. */
/** etcd keys a listing's range read answers at most. */
const LIST_PAGE = 128;

/** Keys a listing inspects at once. */
const LIST_CONCURRENCY = 16;

const ZERO = Buffer.from([0]);

/** The first key past every key that starts with `prefix` (etcd's "prefix end"; `\0`: no end). */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let index = end.length - 1; index >= 0; index--) {
    if ((end[index] as number) < 0xff) {
      end[index] = (end[index] as number) + 1;
      return end.subarray(0, index + 1);
    }
  }
  return ZERO;
}

function rangeOf(directory: KeyDirectory): EtcdRangeRequest {
  return { key: directory.start, range_end: directory.end, sort_target: "Create", sort_order: "Ascend" };
}

/** The entries of a transaction's first (range) answer. */
function rangeIn(answer: EtcdTxnResponse): EtcdKeyValue[] {
  return answer.responses[0]?.response_range?.kvs ?? [];
}

/** The store revision a transaction's first (range) answer was read at. */
function rangeRevision(answer: EtcdTxnResponse): string {
  return answer.responses[0]?.response_range?.header.revision ?? answer.header.revision;
}

/** Permits held and queued in `kvs`. */
function total(kvs: readonly EtcdKeyValue[], limit: number): number {
  let sum = 0;
  for (const kv of kvs) sum += parseEntry(kv.value, limit).weight;
  return sum;
}

/** Whether `mine` holds: the weights of the entries created before it, plus its own, fit `limit`. */
function fits(kvs: readonly EtcdKeyValue[], mine: EtcdKeyValue, limit: number): boolean {
  const created = BigInt(mine.create_revision);
  let sum = parseEntry(mine.value, limit).weight;
  for (const kv of kvs) if (BigInt(kv.create_revision) < created) sum += parseEntry(kv.value, limit).weight;
  return sum <= limit;
}

/** The cause of a loss heard from etcd's side: the held entry deleted ("expired") or replaced ("taken"). */
class EntryLostError extends Error {
  constructor(key: Buffer, reason: "taken" | "expired") {
    const what =
      reason === "expired" ? "is gone (its lease revoked or run out, or the key deleted)" : "holds another value";
    super(`etcd's entry ${key.toString("utf8")} of a held lock ${what}`);
    this.name = "EntryLostError";
  }
}

/** A failed etcd call about `resource`: a StoreUnavailableError with the error as its cause. */
function unavailable(resource: string, error: unknown): StoreUnavailableError {
  const message = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(resource, `etcd failed on "${resource}": ${message}`, { cause: error });
}

function ignore(): void {}
