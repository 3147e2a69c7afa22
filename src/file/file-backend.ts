import type * as contract from "../core/backend.js";
import { pause } from "../internal/sleep.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { Departures } from "./departures.js";
import { KeyHashes, type LockDirectory } from "./directory.js";
import { type Entry, remainingMs, takeable } from "./entry.js";
import { LockPlace, ReaderPlace } from "./entry-places.js";
import { type EntryPlace, HeldEntries, type HeldEntry } from "./held-entries.js";
import { KeyFields } from "./key-field.js";
import { listKeys } from "./listing.js";
import { LockQueue } from "./lock-queue.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { storedHolder } from "./owner.js";
import { ahead, PermitFiles, type Ticket, ticketEntry } from "./permits.js";
import type { TakeResult } from "./store.js";
import { FileReleaseWatcher } from "./watcher.js";

/** Looks `inspect` takes for a settled view of a read-write key, and the pause between them. */
const INSPECT_LOOKS = 20;
const INSPECT_PAUSE_MS = 5;

/**
 * The key whose lock (as a `FileLocker` names it) is the write lock of the read-write key
 * `key`: the name `globallock status` reads the writer of a `--shared`-capable key from.
 */
export function readWriteLockKey(key: string): string {
  return `\u0000rw\u0000${key}`;
}

/**
 * The backend of the file lockers: `FileLocker` (locks: the {@link FileStore}'s `H.lock`) and
 * `FileReadWriteLocker` (counted: a reader's entry in `H.rd`, a writer's `H.lock`; see
 * `permits.ts`). There is no grant queue (a release grants the key to nobody): a release moves
 * the holder's entry out of the lock directory (or the readers' one), an event that
 * {@link FileReleaseWatcher} hears through `fs.watch` and passes on as released. Waiters queue by
 * tickets: a lock's in `lock-queue.ts` (only the first in line hears the lock's events; the others
 * wait for the ticket ahead of theirs to go), a read-write key's in `permits.ts` (every waiter
 * tries, in queue order). An attempt that misses answers the holder's deadline as its retry hint: a
 * stopped holder is taken over then.
 *
 * The resource of a key is the key itself: the watcher names it in its events; operations hash it.
 *
 * Each entry carries its holder's `owner` in its name (see `owner.ts`), so `inspect` reads who
 * holds a key from two directory listings, the lock and its queue (three for a read-write key:
 * the writer, the readers, the queue). A holder's entry records the caller's key too (see
 * `key-field.ts`), so `list` names held keys from the lock directory (see `listing.ts`). A lease
 * is handed off in the directory's scope; `adopt` renames the handed entry to one of its own (see
 * {@link FileStore.adoptEntry}).
 *
 * @param limit the permits of a read-write key (a writer's weight); `undefined` for locks.
 */
export function fileBackend(
  directory: LockDirectory,
  options: ResolvedFileLockerOptions,
  limit?: number,
): contract.BackendFactory {
  return ({ events }) => new FileBackend(directory, options, events, limit);
}

class FileBackend
  implements contract.Backend, contract.WaitQueue, contract.Fencing, contract.HandOff, contract.Listing
{
  readonly can: contract.Capabilities;
  /** Handles name the lock directory: a handle adopts only in the directory it was handed off in. */
  readonly scope: string;
  readonly watcher: FileReleaseWatcher;
  readonly #directory: LockDirectory;
  readonly #permits: PermitFiles | undefined;
  /** A lock's waiting queue (see `lock-queue.ts`); a read-write key's is in {@link #permits}. */
  readonly #lockQueue: LockQueue | undefined;
  /** The files of the keys' waiting queues (a lock's and a read-write key's alike). */
  readonly #queueFiles: PermitFiles;
  readonly #limit: number | undefined;
  /** How long a waiter's ticket lasts unless refreshed (it is, at every attempt: backoff.max). */
  readonly #ticketTtl: number;
  /** Where a lock's (or a writer's) entry lives, and where a reader's does. */
  readonly #lockPlace: LockPlace;
  readonly #readerPlace: ReaderPlace | undefined;
  /** Held leases by token. */
  readonly #held = new HeldEntries();
  /** Queue tickets being left, per key hash: an attempt reads the queue once they are gone. */
  readonly #departures: Departures;
  /** Attempts in flight per key: a concurrent one looks at the lock before building its own. */
  readonly #attempting = new Map<string, number>();
  /** The file name stems of keys; a read-write key's differ from a lock's (they never meet). */
  readonly #hashes: KeyHashes;
  /** What the entries record of their key (see `key-field.ts`). */
  readonly #keyFields: KeyFields;

  constructor(
    directory: LockDirectory,
    options: ResolvedFileLockerOptions,
    events: contract.BackendEvents,
    limit?: number,
  ) {
    const { store } = directory;
    this.#directory = directory;
    this.#limit = limit;
    this.can = { permits: limit !== undefined, queue: this, fencing: this, handOff: this, listing: this };
    this.#permits = limit === undefined ? undefined : new PermitFiles(store);
    this.#queueFiles = this.#permits ?? new PermitFiles(store);
    this.#lockPlace = new LockPlace(store);
    this.#readerPlace = this.#permits === undefined ? undefined : new ReaderPlace(store, this.#permits);
    this.#departures = new Departures(store);
    this.#hashes = new KeyHashes(limit === undefined ? lockKey : readWriteLockKey);
    this.#keyFields = new KeyFields(store);
    this.#ticketTtl = Math.max(options.expiry, 3 * options.backoffMax + 1000);
    // A lock's ticket lasts three polls and a second (4 s by default): a waiter that stops (SIGSTOP,
    // a blocked event loop) holds up those behind it no longer than that.
    const lockQueue =
      limit === undefined
        ? new LockQueue(this.#queueFiles, 3 * options.backoffMax + 1000, (resource) => events.released(resource))
        : undefined;
    this.#lockQueue = lockQueue;
    this.scope = `file:${options.directory}`;
    this.watcher = new FileReleaseWatcher(
      options.directory,
      events,
      (key) => this.#hashes.of(key),
      () => {
        lockQueue?.close();
        return store.close();
      },
      (hash, name) => lockQueue?.quiet(hash, name) ?? false,
    );
  }

  /**
   * The live entries of `resource` (its lock's; a read-write key's readers' too) and its live
   * queue tickets, read without changing anything. Time left is measured as the store measures it
   * (see `remainingMs`): on this boot's monotonic clock for an entry of this boot, else by
   * comparing the writer's wall-clock deadline with this host's wall clock. Stale entries (past
   * their deadline, or of a dead holder: the next attempt takes them over) are not listed.
   */
  inspect(resource: string): Promise<contract.StoredView> {
    return this.#view(this.#hashes.of(resource));
  }

  /**
   * Up to `limit` held keys that start with `prefix` (see `listing.ts`), from their `H.lock` (and,
   * for a read-write key, `H.rd`: its readers); each key as {@link inspect} shows it.
   */
  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    const { store } = this.#directory;
    const permits = this.#permits;
    return listKeys(
      store,
      {
        places: permits === undefined ? ["lock"] : ["lock", "rd"],
        mark: this.#hashes.mark,
        entries: (hash, place) =>
          store.entries(place === "rd" ? (permits as PermitFiles).readersPath(hash) : store.lockPath(hash)),
        view: (hash) => this.#view(hash),
      },
      prefix,
      limit,
    );
  }

  /** {@link inspect} of the key whose files are named by `hash`. */
  async #view(hash: string): Promise<contract.StoredView> {
    const { store } = this.#directory;
    const permits = this.#permits;
    let writers: Entry[] = [];
    let readers: Entry[] = [];
    let tickets: Entry[] = [];
    for (let look = 0; look < INSPECT_LOOKS; look++) {
      if (look > 0) await pause(INSPECT_PAUSE_MS);
      [writers, readers, tickets] = await Promise.all([
        store.entries(store.lockPath(hash)),
        permits === undefined ? [] : store.entries(permits.readersPath(hash)),
        store.entries(this.#queueFiles.queuePath(hash), ticketEntry),
      ]);
      writers = writers.filter((entry) => !takeable(entry));
      readers = readers.filter((entry) => !takeable(entry));
      // A writer and readers seen together: one side is only trying (both write first and look
      // second, and the one that sees the other steps back within a few file operations). Look
      // again for a settled view; one that never settles is shown as it is.
      if (writers.length === 0 || readers.length === 0) break;
    }
    const holders = await Promise.all([
      ...writers.map((entry) => storedHolder(store.directory, entry, this.#limit ?? 1)),
      ...readers.map((entry) => storedHolder(store.directory, entry, 1)),
    ]);
    return { holders, waiting: tickets.filter((ticket) => !takeable(ticket)).length };
  }

  /**
   * Takes over a handed-off lease: renames its entry (the lock's; a reader's, for a weight below a
   * read-write key's limit) to one of this locker's, in one rename (see
   * {@link FileStore.adoptEntry}): of two adopters of one handle, the second finds it `"taken"`.
   */
  async adopt({
    resource,
    token,
    weight,
    duration,
  }: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const hash = this.#hashes.of(resource);
    const reader = this.#permits !== undefined && weight < (this.#limit as number);
    const { store } = this.#directory;
    const dir = reader ? (this.#permits as PermitFiles).readersPath(hash) : store.lockPath(hash);
    const keyField = this.#keyFields.of(resource, hash);
    const result = await this.#directory.use(() => store.adoptEntry(dir, token, newToken(), duration, keyField));
    if (typeof result === "string") return result;
    return this.#held.hold(resource, this.#heldEntry(hash, reader, result.entry), result.startedAt, duration);
  }

  /** Extends `handle` once for a hand-off, and forgets it here (see `HeldEntries.detach`). */
  detach(handle: contract.LockHandle, duration: number): Promise<contract.ExtendOutcome> {
    return this.#held.detach(handle, duration);
  }

  acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const { resource, duration, fencing } = request;
    const hash = this.#hashes.of(resource);
    const concurrent = this.#attempting.get(resource) ?? 0;
    this.#attempting.set(resource, concurrent + 1);
    let attempt: Promise<contract.AttemptOutcome>;
    try {
      const lockQueue = this.#lockQueue;
      if (this.#permits !== undefined) attempt = this.#acquireCounted(this.#permits, hash, request);
      else if (
        lockQueue?.readsFirst(hash, request.queueing.joinOnMiss || request.queueing.grantedToken !== undefined)
      ) {
        attempt = this.#acquireQueued(lockQueue, hash, request);
      } else {
        // Look first when another attempt here is under way (a burst) or this is a retry of a
        // waiter (one read instead of three calls and a clean-up: the key is probably held).
        const probe = concurrent > 0 || request.queueing.joinOnMiss;
        const keyField = this.#keyFields.of(resource, hash);
        const taking = this.#directory.use(() =>
          this.#directory.store.take(hash, newToken(), duration, probe, keyField),
        );
        // Reactions, not async frames: an uncontended take is answered a few microtasks sooner.
        attempt = fencing
          ? taking.then((result) => this.#outcome(resource, hash, false, result, duration, true))
          : taking.then((result) => this.#settle(resource, hash, false, result, duration));
      }
    } catch (error) {
      this.#attemptEnded(resource);
      return Promise.reject(error);
    }
    return attempt.then(
      (outcome) => {
        this.#attemptEnded(resource);
        return outcome;
      },
      (error: unknown) => {
        this.#attemptEnded(resource);
        throw error;
      },
    );
  }

  /** One attempt on `resource` ended (see {@link acquire}'s look-first rule). */
  #attemptEnded(resource: string): void {
    const left = (this.#attempting.get(resource) ?? 1) - 1;
    if (left === 0) this.#attempting.delete(resource);
    else this.#attempting.set(resource, left);
  }

  /**
   * A lock's attempt in queue order (see `lock-queue.ts`): it tries unless a live ticket is ahead
   * of its own (of any, without one); a miss that joins the queue takes (or keeps) a ticket, whose
   * token is its registration. Taking the key leaves the queue.
   */
  async #acquireQueued(
    queue: LockQueue,
    hash: string,
    request: contract.AttemptRequest,
  ): Promise<contract.AttemptOutcome> {
    const { resource, duration, queueing, fencing } = request;
    const sentAt = performance.now();
    await this.#departures.of(hash);
    const { store } = this.#directory;
    // First in line as last read (woken by the lock's release, most likely), a read younger than
    // its ticket: take at once, with no look at the queue or the lock. A miss reads the queue again
    // next time, and so does a waiter frozen past its ticket's lapse (others may have queued ahead).
    const head = queue.headTicket(hash, queueing.grantedToken);
    const look =
      head === undefined
        ? await this.#directory.use(() => queue.look(hash, queueing.grantedToken))
        : queue.lookAsHead(hash);
    let outcome: contract.AttemptOutcome = { kind: "held" };
    if (look.ahead.length === 0) {
      const keyField = this.#keyFields.of(resource, hash);
      const result = await this.#directory.use(() =>
        store.take(hash, newToken(), duration, head === undefined, keyField),
      );
      outcome = await this.#outcome(resource, hash, false, result, duration, fencing);
      if (outcome.kind === "acquired") {
        // Its ticket goes once the taker has resumed: its section does not wait for that.
        const own = look.own;
        void this.#departures.track(
          hash,
          nextTurn().then(() => queue.leave(hash, own)),
        );
        return outcome;
      }
      if (head !== undefined) queue.unverify(hash);
    }
    if (!queueing.joinOnMiss) return outcome;
    const token = await this.#directory.use(() => queue.join(resource, hash, look));
    return { ...outcome, kind: "held", registration: { token, weight: 1, sentAt, serverMs: 0 } };
  }

  /**
   * A read-write attempt (weight 1: a reader; the limit: a writer) in queue order (see
   * `permits.ts`): it tries unless a ticket ahead of its own (of a writer, for a reader) is live;
   * a miss that joins the queue takes (or keeps) a ticket, whose token is its registration.
   */
  async #acquireCounted(
    permits: PermitFiles,
    hash: string,
    request: contract.AttemptRequest,
  ): Promise<contract.AttemptOutcome> {
    const { resource, duration, queueing, fencing, weight } = request;
    const writer = weight === this.#limit && weight > 1;
    const sentAt = performance.now();
    await this.#departures.of(hash);
    const tickets = await this.#directory.use(() => permits.tickets(hash));
    const own = tickets.find((ticket) => ticket.entry.token === queueing.grantedToken);
    const before = own === undefined ? tickets : tickets.filter((ticket) => ahead(ticket, own));
    let outcome: contract.AttemptOutcome = { kind: "held" };
    if (writer ? before.length === 0 : !before.some((ticket) => ticket.writer)) {
      outcome = writer
        ? await this.#takeWrite(permits, resource, hash, duration, fencing)
        : await this.#outcome(
            resource,
            hash,
            true,
            await permits.takeRead(hash, newToken(), duration, this.#keyFields.of(resource, hash)),
            duration,
            false,
          );
      if (outcome.kind === "acquired") {
        if (own !== undefined) await permits.leave(hash, own.entry.token);
        return outcome;
      }
    }
    if (!queueing.joinOnMiss) return outcome;
    const token = await this.#register(permits, hash, writer, own);
    return { ...outcome, kind: "held", registration: { token, weight, sentAt, serverMs: 0 } };
  }

  async #register(permits: PermitFiles, hash: string, writer: boolean, own: Ticket | undefined): Promise<string> {
    return (await permits.register(hash, writer, own?.entry.token ?? newToken(), this.#ticketTtl, own)).entry.token;
  }

  /** A writer takes the lock, then makes sure no reader holds (else it gives the lock back). */
  async #takeWrite(
    permits: PermitFiles,
    resource: string,
    hash: string,
    duration: number,
    fencing: boolean,
  ): Promise<contract.AttemptOutcome> {
    const { store } = this.#directory;
    const result = await store.take(hash, newToken(), duration, false, this.#keyFields.of(resource, hash));
    if (!result.taken) return this.#outcome(resource, hash, false, result, duration, false);
    let clear: boolean;
    try {
      clear = await permits.noReaders(hash);
    } catch (error) {
      await store.release(hash, result.entry).catch(() => undefined);
      throw error;
    }
    if (clear) return this.#outcome(resource, hash, false, result, duration, fencing);
    await store.release(hash, result.entry);
    return { kind: "held" };
  }

  /** A take's outcome: a miss with the holder's deadline as hint, or a grant (fenced when asked). */
  #outcome(
    resource: string,
    hash: string,
    reader: boolean,
    result: TakeResult,
    duration: number,
    fencing: boolean,
  ): contract.AttemptOutcome | Promise<contract.AttemptOutcome> {
    if (!result.taken || !fencing) return this.#settle(resource, hash, reader, result, duration);
    const held = this.#heldEntry(hash, reader, result.entry);
    return this.#held.holdFenced(resource, held, duration, this.#directory.store);
  }

  /**
   * {@link #outcome} without a fencing token, at once: a miss (with the holder's time left as the
   * retry hint), or the lease `result` took, now held here.
   */
  #settle(
    resource: string,
    hash: string,
    reader: boolean,
    result: TakeResult,
    duration: number,
  ): contract.AttemptOutcome {
    if (!result.taken) {
      const { holder } = result;
      return holder === undefined
        ? { kind: "held" }
        : { kind: "held", retryAfterMs: Math.max(1, remainingMs(holder) + 2) };
    }
    const held = this.#heldEntry(hash, reader, result.entry);
    return { kind: "acquired", handle: this.#held.hold(resource, held, result.startedAt, duration) };
  }

  /** A lease of `hash` as held here: a reader's entry, or the lock's (a lock's, or a writer's). */
  #heldEntry(hash: string, reader: boolean, entry: Entry): HeldEntry {
    const place: EntryPlace = reader ? (this.#readerPlace as ReaderPlace) : this.#lockPlace;
    return { hash, weight: reader ? 1 : (this.#limit ?? 1), entry, place };
  }

  extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    return this.#held.extend(handles, duration);
  }

  release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    return this.#held.release(handle);
  }

  async leaveQueue(resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken === undefined) return;
    const hash = this.#hashes.of(resource);
    const lockQueue = this.#lockQueue;
    await this.#departures.track(
      hash,
      lockQueue !== undefined
        ? lockQueue.leave(hash, undefined, grantedToken)
        : (this.#permits as PermitFiles).leave(hash, grantedToken),
    );
  }

  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const held = this.#held.get(handle.token);
    return held === undefined || held.place !== this.#lockPlace
      ? undefined
      : this.#directory.store.nextFencingToken(held.hash);
  }
}

/** The key whose files a `FileLocker` names `key`'s: the key itself. */
function lockKey(key: string): string {
  return key;
}

/** Resolves in the event loop's next check phase (after the callbacks and reactions now due). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
