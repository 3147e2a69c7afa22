import type * as contract from "../backend.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { Departures } from "./departures.js";
import type { KeyHashes, LockDirectory } from "./directory.js";
import { type Entry, takeable } from "./entry.js";
import { HeldEntries, type HeldEntry } from "./held-entries.js";
import { KeyFields } from "./key-field.js";
import { listKeys } from "./listing.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { storedHolder } from "./owner.js";
import type { Permit } from "./semaphore-files.js";
import { FileReleaseWatcher } from "./watcher.js";

/** What a file backend's `inspect` reads of a key: its live holders' entries, with their weights, and its queue tickets. */
export interface KeyLook {
  readonly holders: readonly Permit[];
  readonly tickets: readonly Entry[];
}

/** What sets one kind of file backend apart (a lock's or a read-write key's, a semaphore's). */
export interface FileBackendSetup {
  /** Names the kind and the lock directory (see {@link FileBackendBase.scope}). */
  readonly scope: string;
  /** The file name stems of the kind's keys. */
  readonly hashes: KeyHashes;
  /** Whether a key has several permits (`Capabilities.permits`). */
  readonly permits: boolean;
  /** The suffixes of the directories that hold a key's holders' entries (see `ListedKind.places`). */
  readonly places: readonly string[];
  /** What the watcher reports to. */
  readonly events: contract.BackendEvents;
  /** Called by the watcher's close: closes the store and whatever else the backend keeps in the directory. */
  readonly onClose: () => Promise<void>;
  /** Whether an event is not for this locker's waiters (see {@link FileReleaseWatcher}'s `quiet`). */
  readonly quiet?: (hash: string, name: string) => boolean;
}

/**
 * What the file backends (`FileBackend`, `FileSemaphoreBackend`) do alike around the entries they
 * hold (see {@link HeldEntries}): the release watcher, adoption of a handed-off lease, hand-off,
 * extension, release, leaving a waiting queue, and reading a key for `inspect` and `list`. Each
 * backend says where a lease of a given weight has its entry, reads its holders and tickets, and
 * makes its own attempts.
 */
export abstract class FileBackendBase
  implements contract.Backend, contract.WaitQueue, contract.Fencing, contract.HandOff, contract.Listing
{
  readonly can: contract.Capabilities;
  /** Handles name the lock directory: a handle adopts only in the directory it was handed off in. */
  readonly scope: string;
  readonly watcher: FileReleaseWatcher;
  protected readonly directory: LockDirectory;
  /** The file name stems of keys. */
  protected readonly hashes: KeyHashes;
  /** Held leases by token. */
  protected readonly held = new HeldEntries();
  /** Queue tickets being left, per key hash: an attempt reads the queue once they are gone. */
  protected readonly departures: Departures;
  /** What the entries record of their key (see `key-field.ts`). */
  protected readonly keyFields: KeyFields;
  /** How long a waiter's ticket lasts unless refreshed (it is, at every attempt: backoff.max). */
  protected readonly ticketTtl: number;
  readonly #places: readonly string[];

  constructor(directory: LockDirectory, options: ResolvedFileLockerOptions, setup: FileBackendSetup) {
    const { store } = directory;
    this.directory = directory;
    this.hashes = setup.hashes;
    this.#places = setup.places;
    this.can = { permits: setup.permits, queue: this, fencing: this, handOff: this, listing: this };
    this.departures = new Departures(store);
    this.keyFields = new KeyFields(store);
    this.ticketTtl = Math.max(options.expiry, 3 * options.backoffMax + 1000);
    this.scope = setup.scope;
    this.watcher = new FileReleaseWatcher(
      options.directory,
      setup.events,
      (key) => this.hashes.of(key),
      setup.onClose,
      setup.quiet,
    );
  }

  abstract acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome>;

  abstract issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined>;

  /** The directory where a lease of `weight` on the key of `hash` has its entry. */
  protected abstract entryDirectory(hash: string, weight: number): string;

  /** A lease of `weight` on the key of `hash`, whose entry is `entry`, as held here. */
  protected abstract heldLease(hash: string, weight: number, entry: Entry): HeldEntry;

  /** The live holders and the queue tickets of the key of `hash`, read without changing anything. */
  protected abstract look(hash: string): Promise<KeyLook>;

  /** The entries (stale or not) of the key of `hash` in its directory `place` (one of the kind's places). */
  protected abstract placeEntries(hash: string, place: string): Promise<Entry[]>;

  /** Removes the queue ticket `token` of the key of `hash`. */
  protected abstract leaveTicket(hash: string, token: string): Promise<void>;

  /**
   * The live holders of `resource` (with their weights) and its live queue tickets, read without
   * changing anything. Time left is measured as the store measures it (see `remainingMs`): on this
   * boot's monotonic clock for an entry of this boot, else by comparing the writer's wall-clock
   * deadline with this host's wall clock. Stale entries (past their deadline, or of a dead holder:
   * the next attempt takes them over) are not listed.
   */
  inspect(resource: string): Promise<contract.StoredView> {
    return this.#view(this.hashes.of(resource));
  }

  /**
   * Up to `limit` held keys that start with `prefix` (see `listing.ts`), from their holders'
   * directories; each key as {@link inspect} shows it.
   */
  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    return listKeys(
      this.directory.store,
      {
        places: this.#places,
        mark: this.hashes.mark,
        entries: (hash, place) => this.placeEntries(hash, place),
        view: (hash) => this.#view(hash),
      },
      prefix,
      limit,
    );
  }

  /** {@link inspect} of the key whose files are named by `hash`. */
  async #view(hash: string): Promise<contract.StoredView> {
    const { holders, tickets } = await this.look(hash);
    const { directory } = this.directory.store;
    return {
      holders: await Promise.all(holders.map(({ entry, weight }) => storedHolder(directory, entry, weight))),
      waiting: tickets.filter((ticket) => !takeable(ticket)).length,
    };
  }

  /**
   * Takes over a handed-off lease: renames its entry (where {@link entryDirectory} says a lease of
   * its weight has it) to one of this locker's, in one rename (see {@link FileStore.adoptEntry}):
   * of two adopters of one handle, the second finds it `"taken"`.
   */
  async adopt({
    resource,
    token,
    weight,
    duration,
  }: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const hash = this.hashes.of(resource);
    const { store } = this.directory;
    const dir = this.entryDirectory(hash, weight);
    const keyField = this.keyFields.of(resource, hash);
    const result = await this.directory.use(() => store.adoptEntry(dir, token, newToken(), duration, keyField));
    if (typeof result === "string") return result;
    return this.held.hold(resource, this.heldLease(hash, weight, result.entry), result.startedAt, duration);
  }

  /** Extends `handle` once for a hand-off, and forgets it here (see `HeldEntries.detach`). */
  detach(handle: contract.LockHandle, duration: number): Promise<contract.ExtendOutcome> {
    return this.held.detach(handle, duration);
  }

  extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    return this.held.extend(handles, duration);
  }

  release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    return this.held.release(handle);
  }

  async leaveQueue(resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken === undefined) return;
    const hash = this.hashes.of(resource);
    await this.departures.track(hash, this.leaveTicket(hash, grantedToken));
  }
}
