import { performance } from "node:perf_hooks";
import * as contract from "../backend.js";
import type { ReleaseOutcome } from "../locker.js";
import { EntryAttempts, type Granted } from "./entry-attempts.js";
import { EtcdCommands } from "./etcd-commands.js";
import { EntryLostError, unavailable } from "./etcd-errors.js";
import { HeldWatch } from "./held-watch.js";
import { directoryOf, entryKey, entryValue, freshToken, type KeyDirectory, parseEntry, slotOf } from "./layout.js";
import { boundOf, type HeldEntry, isLeaseGone, type LeaseRecord, Leases, ttlSecondsOf } from "./leases.js";
import type { ResolvedEtcdLockerOptions } from "./options.js";
import { rangeIn } from "./ranges.js";
import { inspectKey, listHeld, type ViewSource } from "./stored-views.js";
import type { EtcdClient } from "./types.js";
import { EtcdReleaseWatcher } from "./watcher.js";

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
export function etcdBackend(
  client: EtcdClient,
  options: ResolvedEtcdLockerOptions,
  limit: number,
): contract.BackendFactory {
  return (context) => new EtcdBackend(client, options, context, limit);
}

class EtcdBackend
  implements contract.Backend, contract.Naming, contract.WaitQueue, contract.Fencing, contract.HandOff, contract.Listing
{
  readonly can: contract.Capabilities = {
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
  readonly #events: contract.BackendEvents;
  readonly #limit: number;
  readonly #owner: string;
  readonly #leases: Leases;
  /** Every command, bounded by the operation timeout, and the deletions left in the background. */
  readonly #commands: EtcdCommands;
  /** Attempts, and the entries of waiters queued until they hold or leave. */
  readonly #attempts: EntryAttempts;
  /** What inspect and list read with. */
  readonly #views: ViewSource;
  /** Held entries, by token (until released, lost or handed off). */
  readonly #held = new Map<string, HeldEntry>();
  /** Listens for the deletes of held entries. */
  readonly #heldWatch: HeldWatch;

  constructor(client: EtcdClient, options: ResolvedEtcdLockerOptions, context: contract.BackendContext, limit: number) {
    this.#client = client;
    this.#options = options;
    this.#events = context.events;
    this.#limit = limit;
    this.#owner = context.owner;
    this.scope = `etcd:${options.prefix}`;
    const commands = new EtcdCommands(client, options.operationTimeout);
    this.#commands = commands;
    this.#leases = new Leases({
      create: (ttl) => client.lease(ttl, { autoKeepAlive: false }),
      timeoutMs: options.operationTimeout,
      bound: (command) => commands.bound(command),
      unavailable: (resource, error) => unavailable(resource, error),
      lost: (record, cause) => {
        if (record.tokens.size > 0) this.#events.lost(new Set(record.tokens), "expired", cause);
      },
    });
    const { prefix } = options;
    this.#attempts = new EntryAttempts({ client, commands, prefix, owner: context.owner, limit });
    this.#views = { client, commands, leases: this.#leases, prefix, limit };
    const namespaceLength = client.prefix.length;
    this.watcher = new EtcdReleaseWatcher(
      {
        client,
        directoryOf: (resource) => this.#directory(resource).start.subarray(namespaceLength).toString("utf8"),
        keyOf: (resource) => resource.slice(prefix.length),
        timeoutMs: options.operationTimeout,
        deleted: (key) => this.#deleted(Buffer.concat([client.prefix, key])),
        onClose: () => this.#close(),
      },
      context.events,
    );
    this.#heldWatch = new HeldWatch({
      watcher: this.watcher,
      unheard: (token, held) => {
        if (!commands.closing) commands.track(this.#check(token, held));
      },
    });
  }

  resourceOf(key: string): string {
    return this.#options.prefix + key;
  }

  #directory(resource: string): KeyDirectory {
    const { prefix } = this.#options;
    return directoryOf(this.#client.prefix, prefix, resource.slice(prefix.length));
  }

  async acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
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

  async #attempt(request: contract.AttemptRequest, record: LeaseRecord): Promise<contract.AttemptOutcome> {
    const outcome = await this.#attempts.attempt(request, record);
    return outcome.kind === "granted" ? this.#granted(request, outcome) : outcome;
  }

  /** The outcome of a grant of `granted`'s entry, fenced by its create revision when asked. */
  #granted(request: contract.AttemptRequest, granted: Granted): contract.AttemptOutcome {
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
  #hold(token: string, sentAt: number, validUntil: number, held: HeldEntry, seenAt: string): contract.LockHandle {
    this.#held.set(token, held);
    held.record.tokens.add(token);
    this.#heldWatch.add(token, held, seenAt, sentAt);
    return new contract.LockHandle(token, held.resource, sentAt, validUntil);
  }

  /** Reads a held entry the watch may have missed the delete of: gone or replaced, it is lost. */
  async #check(token: string, held: HeldEntry): Promise<void> {
    const { kvs } = await this.#commands.range(held.resource, { key: held.key });
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
  async extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    const now = performance.now();
    const byRecord = new Map<LeaseRecord, number[]>();
    const outcomes: contract.ExtendOutcome[] = [];
    for (let index = 0; index < handles.length; index++) {
      const handle = handles[index] as contract.LockHandle;
      const held = this.#held.get(handle.token);
      outcomes.push(held === undefined ? "taken" : "expired");
      if (held === undefined || now >= handle.validUntil) continue;
      const indexes = byRecord.get(held.record);
      if (indexes === undefined) byRecord.set(held.record, [index]);
      else indexes.push(index);
    }
    await Promise.all(
      Array.from(byRecord, async ([record, indexes]) => {
        let outcome: contract.ExtendOutcome;
        try {
          const sentAt = await this.#leases.keepAlive(record);
          for (const index of indexes) {
            const handle = handles[index] as contract.LockHandle;
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
  async release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return "expired";
    this.#forget(handle.token, held);
    const { key, value, record } = held;
    record.tokens.delete(handle.token);
    try {
      const answer = await this.#commands.txn(handle.resource, {
        compare: [{ key, target: "Value", result: "Equal", value }],
        success: [{ request_delete_range: { key } }],
        failure: [{ request_range: { key } }],
      });
      if (answer.succeeded) return performance.now() >= handle.validUntil ? "expired" : "released";
      return rangeIn(answer).length > 0 ? "taken" : "expired";
    } catch {
      // The entry may still be there, on a lease this locker keeps alive for its other locks: it
      // would never run out. Delete it once etcd answers again (say, after an election).
      this.#commands.deleteWhenBack(key, value);
      return "unknown";
    }
  }

  async leaveQueue(_resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken !== undefined) await this.#attempts.leave(grantedToken);
  }

  /** The fencing token of a held lock: its entry's create revision (read back). */
  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return undefined;
    const { kvs } = await this.#commands.range(handle.resource, { key: held.key });
    const entry = kvs[0];
    return entry?.value.equals(held.value) ? BigInt(entry.create_revision) : undefined;
  }

  /** Who holds `resource` and who waits (see {@link inspectKey}). */
  inspect(resource: string): Promise<contract.StoredView> {
    return inspectKey(this.#views, resource);
  }

  /** Held keys under the locker's prefix that start with `prefix` (see {@link listHeld}). */
  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    return listHeld(this.#views, prefix, limit);
  }

  /**
   * Takes over a handed-off entry: where it still holds the handed token, puts it again (same
   * key: same create revision, so the same fencing token) with a fresh token and this locker's
   * lease, in a transaction that checks it was not changed since it was read.
   */
  async adopt(request: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const { resource, token, weight, duration } = request;
    const slot = slotOf(token);
    if (slot === undefined) return "taken";
    const directory = this.#directory(resource);
    const key = entryKey(directory, token);
    const record = await this.#leases.get(ttlSecondsOf(duration), resource);
    const { kvs } = await this.#commands.range(resource, { key });
    const current = kvs[0];
    if (current === undefined) return "expired";
    if (parseEntry(current.value, this.#limit).token !== token) return "taken";
    const fresh = freshToken(slot);
    const value = entryValue(fresh, weight, this.#owner);
    const sentAt = performance.now();
    const answer = await this.#commands.txn(resource, {
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
  async detach(handle: contract.LockHandle, duration: number): Promise<contract.ExtendOutcome> {
    const [outcome = "taken"] = await this.extend([handle], duration);
    const held = this.#held.get(handle.token);
    if (outcome === "extended" && held !== undefined) this.#forget(handle.token, held);
    return outcome;
  }

  async #close(): Promise<void> {
    this.#heldWatch.close();
    await this.#commands.close();
    // Waiters' entries are left (their waits were rejected): delete them; held entries stay.
    await this.#attempts.close();
    await this.#leases.close();
  }
}
