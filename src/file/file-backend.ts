import type * as contract from "../backend.js";
import { pause } from "../internal/sleep.js";
import { newToken } from "../internal/token.js";
import { FileBackendBase, type KeyLook } from "./backend-base.js";
import { KeyHashes, type LockDirectory } from "./directory.js";
import { type Entry, remainingMs, takeable } from "./entry.js";
import { LockPlace, ReaderPlace } from "./entry-places.js";
import type { EntryPlace, HeldEntry } from "./held-entries.js";
import { LockQueue } from "./lock-queue.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { ahead, PermitFiles, type Ticket, ticketEntry } from "./permits.js";
import type { TakeResult } from "./store.js";

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
 * `FileReleaseWatcher` hears through `fs.watch` and passes on as released. Waiters queue by
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

class FileBackend extends FileBackendBase {
  readonly #permits: PermitFiles | undefined;
  /** A lock's waiting queue (see `lock-queue.ts`); a read-write key's is in {@link #permits}. */
  readonly #lockQueue: LockQueue | undefined;
  /** The files of the keys' waiting queues (a lock's and a read-write key's alike). */
  readonly #queueFiles: PermitFiles;
  readonly #limit: number | undefined;
  /** Where a lock's (or a writer's) entry lives, and where a reader's does. */
  readonly #lockPlace: LockPlace;
  readonly #readerPlace: ReaderPlace | undefined;
  /** Attempts in flight per key: a concurrent one looks at the lock before building its own. */
  readonly #attempting = new Map<string, number>();

  constructor(
    directory: LockDirectory,
    options: ResolvedFileLockerOptions,
    events: contract.BackendEvents,
    limit?: number,
  ) {
    const { store } = directory;
    const permits = limit === undefined ? undefined : new PermitFiles(store);
    const queueFiles = permits ?? new PermitFiles(store);
    // A lock's ticket lasts three polls and a second (4 s by default): a waiter that stops (SIGSTOP,
    // a blocked event loop) holds up those behind it no longer than that.
    const lockQueue =
      limit === undefined
        ? new LockQueue(queueFiles, 3 * options.backoffMax + 1000, (resource) => events.released(resource))
        : undefined;
    super(directory, options, {
      scope: `file:${options.directory}`,
      // A read-write key's file name stems differ from a lock's (they never meet).
      hashes: new KeyHashes(limit === undefined ? lockKey : readWriteLockKey),
      permits: limit !== undefined,
      places: permits === undefined ? ["lock"] : ["lock", "rd"],
      events,
      onClose: () => {
        lockQueue?.close();
        return store.close();
      },
      quiet: (hash, name) => lockQueue?.quiet(hash, name) ?? false,
    });
    this.#limit = limit;
    this.#permits = permits;
    this.#queueFiles = queueFiles;
    this.#lockQueue = lockQueue;
    this.#lockPlace = new LockPlace(store);
    this.#readerPlace = permits === undefined ? undefined : new ReaderPlace(store, permits);
  }

  /**
   * The live entries of a key's lock (a read-write key's readers' too) and its queue tickets. A
   * writer and readers seen together: one side is only trying (both write first and look second,
   * and the one that sees the other steps back within a few file operations). It looks again for
   * a settled view; one that never settles is shown as it is.
   */
  protected async look(hash: string): Promise<KeyLook> {
    const { store } = this.directory;
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
      if (writers.length === 0 || readers.length === 0) break;
    }
    const writerWeight = this.#limit ?? 1;
    return {
      holders: [
        ...writers.map((entry) => ({ entry, weight: writerWeight })),
        ...readers.map((entry) => ({ entry, weight: 1 })),
      ],
      tickets,
    };
  }

  /** `H.lock` (a lock's, or a read-write key's writer's) or `H.rd` (a read-write key's readers). */
  protected placeEntries(hash: string, place: string): Promise<Entry[]> {
    const { store } = this.directory;
    return store.entries(place === "rd" ? (this.#permits as PermitFiles).readersPath(hash) : store.lockPath(hash));
  }

  /** The lock's directory; a reader's, for a weight below a read-write key's limit. */
  protected entryDirectory(hash: string, weight: number): string {
    return this.#reads(weight) ? (this.#permits as PermitFiles).readersPath(hash) : this.directory.store.lockPath(hash);
  }

  protected heldLease(hash: string, weight: number, entry: Entry): HeldEntry {
    return this.#heldEntry(hash, this.#reads(weight), entry);
  }

  /** Whether a lease of `weight` is a reader's (of a read-write key, below its limit). */
  #reads(weight: number): boolean {
    return this.#permits !== undefined && weight < (this.#limit as number);
  }

  acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const { resource, duration, fencing } = request;
    const hash = this.hashes.of(resource);
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
        const keyField = this.keyFields.of(resource, hash);
        const taking = this.directory.use(() => this.directory.store.take(hash, newToken(), duration, probe, keyField));
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
    await this.departures.of(hash);
    const { store } = this.directory;
    // First in line as last read (woken by the lock's release, most likely), a read younger than
    // its ticket: take at once, with no look at the queue or the lock. A miss reads the queue again
    // next time, and so does a waiter frozen past its ticket's lapse (others may have queued ahead).
    const head = queue.headTicket(hash, queueing.grantedToken);
    const look =
      head === undefined
        ? await this.directory.use(() => queue.look(hash, queueing.grantedToken))
        : queue.lookAsHead(hash);
    let outcome: contract.AttemptOutcome = { kind: "held" };
    if (look.ahead.length === 0) {
      const keyField = this.keyFields.of(resource, hash);
      const result = await this.directory.use(() =>
        store.take(hash, newToken(), duration, head === undefined, keyField),
      );
      outcome = await this.#outcome(resource, hash, false, result, duration, fencing);
      if (outcome.kind === "acquired") {
        // Its ticket goes once the taker has resumed: its section does not wait for that.
        const own = look.own;
        void this.departures.track(
          hash,
          nextTurn().then(() => queue.leave(hash, own)),
        );
        return outcome;
      }
      if (head !== undefined) queue.unverify(hash);
    }
    if (!queueing.joinOnMiss) return outcome;
    const token = await this.directory.use(() => queue.join(resource, hash, look));
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
    await this.departures.of(hash);
    const tickets = await this.directory.use(() => permits.tickets(hash));
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
            await permits.takeRead(hash, newToken(), duration, this.keyFields.of(resource, hash)),
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
    return (await permits.register(hash, writer, own?.entry.token ?? newToken(), this.ticketTtl, own)).entry.token;
  }

  /** A writer takes the lock, then makes sure no reader holds (else it gives the lock back). */
  async #takeWrite(
    permits: PermitFiles,
    resource: string,
    hash: string,
    duration: number,
    fencing: boolean,
  ): Promise<contract.AttemptOutcome> {
    const { store } = this.directory;
    const result = await store.take(hash, newToken(), duration, false, this.keyFields.of(resource, hash));
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
    return this.held.holdFenced(resource, held, duration, this.directory.store);
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
    return { kind: "acquired", handle: this.held.hold(resource, held, result.startedAt, duration) };
  }

  /** A lease of `hash` as held here: a reader's entry, or the lock's (a lock's, or a writer's). */
  #heldEntry(hash: string, reader: boolean, entry: Entry): HeldEntry {
    const place: EntryPlace = reader ? (this.#readerPlace as ReaderPlace) : this.#lockPlace;
    return { hash, weight: reader ? 1 : (this.#limit ?? 1), entry, place };
  }

  /** Leaves a lock's queue (see `lock-queue.ts`), or a read-write key's (see `permits.ts`). */
  protected leaveTicket(hash: string, token: string): Promise<void> {
    const lockQueue = this.#lockQueue;
    return lockQueue !== undefined
      ? lockQueue.leave(hash, undefined, token)
      : (this.#permits as PermitFiles).leave(hash, token);
  }

  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const held = this.held.get(handle.token);
    return held === undefined || held.place !== this.#lockPlace
      ? undefined
      : this.directory.store.nextFencingToken(held.hash);
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
