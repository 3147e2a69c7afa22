import type {
  AdoptRequest,
  Backend,
  BackendEvents,
  BackendFactory,
  Capabilities,
  Fencing,
  HandOff,
  StoredHolder,
  StoredView,
  WaitQueue,
} from "../core/backend.js";
import { type AttemptOutcome, type AttemptRequest, type ExtendOutcome, LockHandle } from "../core/backend.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { toUnknown } from "../internal/release-func.js";
import { pause } from "../internal/sleep.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { hashKey, type LockDirectory } from "./directory.js";
import { type Entry, remainingMs, takeable } from "./entry.js";
import { LockQueue } from "./lock-queue.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { readOwner } from "./owner.js";
import { ahead, PermitFiles, type Ticket, ticketEntry } from "./permits.js";
import type { TakeResult } from "./store.js";
import { FileReleaseWatcher } from "./watcher.js";

/** How long a release may take before it reports `"unknown"` (the lock then expires on its own). */
const RELEASE_TIMEOUT_MS = 5000;
/** Looks `inspect` takes for a settled view of a read-write key, and the pause between them. */
const INSPECT_LOOKS = 20;
const INSPECT_PAUSE_MS = 5;

/** A lease held in the directory: its current entry, and where it lives. */
interface Held {
  readonly hash: string;
  /** A reader's entry (in `H.rd`), else the lock's (`H.lock`). */
  readonly reader: boolean;
  entry: Entry;
  /** The extension in flight, if any: a release waits for it (it renames the entry). */
  extending?: Promise<Entry | undefined> | undefined;
}

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
 * the writer, the readers, the queue). A lease is handed off in the directory's scope; `adopt`
 * renames the handed entry to one of its own (see {@link FileStore.adoptEntry}).
 *
 * @param limit the permits of a read-write key (a writer's weight); `undefined` for locks.
 */
export function fileBackend(
  directory: LockDirectory,
  options: ResolvedFileLockerOptions,
  limit?: number,
): BackendFactory {
  return ({ events }) => new FileBackend(directory, options, events, limit);
}

class FileBackend implements Backend, WaitQueue, Fencing, HandOff {
  readonly can: Capabilities;
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
  /** Held leases by token. */
  readonly #held = new Map<string, Held>();
  /** Queue tickets being left, per key hash: an attempt reads the queue once they are gone. */
  readonly #leaving = new Map<string, Promise<void>>();
  /** Attempts in flight per key: a concurrent one looks at the lock before building its own. */
  readonly #attempting = new Map<string, number>();
  /**
   * The bound on releases ({@link RELEASE_TIMEOUT_MS}): one coarse timer for all of them while any
   * is in flight, not a timer set and cleared per release.
   */
  readonly #releaseDeadlines = new DeadlineGroup(RELEASE_TIMEOUT_MS, { inOrder: false });

  constructor(directory: LockDirectory, options: ResolvedFileLockerOptions, events: BackendEvents, limit?: number) {
    this.#directory = directory;
    this.#limit = limit;
    this.can = {
      permits: limit !== undefined,
      queue: this,
      fencing: this,
      handOff: this,
      listing: {
        unsupported: "lock files are named by a hash of the key and do not record it, so the key cannot be read back",
      },
    };
    this.#permits = limit === undefined ? undefined : new PermitFiles(directory.store);
    this.#queueFiles = this.#permits ?? new PermitFiles(directory.store);
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
      (key) => this.#hashOf(key),
      () => {
        lockQueue?.close();
        return directory.store.close();
      },
      (hash, name) => lockQueue?.quiet(hash, name) ?? false,
    );
  }

  /** The key {@link #hashOf} hashed last, and its hash: a key locked again and again is hashed once. */
  #lastKey: string | undefined;
  #lastHash = "";

  /** The file name stem of `key`; a read-write key's differ from a lock's (they never meet). */
  #hashOf(key: string): string {
    if (key === this.#lastKey) return this.#lastHash;
    const hash = hashKey(this.#permits === undefined ? key : readWriteLockKey(key));
    this.#lastKey = key;
    this.#lastHash = hash;
    return hash;
  }

  /** Waiters queue by tickets, and releases grant the key to nobody: the first in line tries. */
  grants(): boolean {
    return false;
  }

  /**
   * The live entries of `resource` (its lock's; a read-write key's readers' too) and its live
   * queue tickets, read without changing anything. Time left is measured as the store measures it
   * (see `remainingMs`): on this boot's monotonic clock for an entry of this boot, else by
   * comparing the writer's wall-clock deadline with this host's wall clock. Stale entries (past
   * their deadline, or of a dead holder: the next attempt takes them over) are not listed.
   */
  async inspect(resource: string): Promise<StoredView> {
    const hash = this.#hashOf(resource);
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
      ...writers.map((entry) => this.#describe(entry, this.#limit ?? 1)),
      ...readers.map((entry) => this.#describe(entry, 1)),
    ]);
    return { holders, waiting: tickets.filter((ticket) => !takeable(ticket)).length };
  }

  async #describe(entry: Entry, weight: number): Promise<StoredHolder> {
    const owner = await readOwner(this.#directory.store.directory, entry.owner);
    const expiresInMs = Math.max(0, remainingMs(entry));
    return entry.fence === undefined
      ? { owner, weight, expiresInMs }
      : { owner, weight, expiresInMs, fencingToken: entry.fence };
  }

  /**
   * Takes over a handed-off lease: renames its entry (the lock's; a reader's, for a weight below a
   * read-write key's limit) to one of this locker's, in one rename (see
   * {@link FileStore.adoptEntry}): of two adopters of one handle, the second finds it `"taken"`.
   */
  async adopt({ resource, token, weight, duration }: AdoptRequest): Promise<LockHandle | "taken" | "expired"> {
    const hash = this.#hashOf(resource);
    const reader = this.#permits !== undefined && weight < (this.#limit as number);
    const { store } = this.#directory;
    const dir = reader ? (this.#permits as PermitFiles).readersPath(hash) : store.lockPath(hash);
    const result = await this.#directory.use(() => store.adoptEntry(dir, token, newToken(), duration));
    if (typeof result === "string") return result;
    return this.#hold(resource, hash, reader, result.entry, result.startedAt, duration);
  }

  /**
   * Extends `handle` once for a hand-off, with an entry that names no process (the one handing it
   * off may exit before it is adopted, and must not be judged dead for it), and forgets it here.
   * (Called by the core's `Lease.handOff` instead of an extension.)
   */
  async detach(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return "taken";
    if (performance.now() >= handle.validUntil) return "expired";
    const startedAt = performance.now();
    const { store } = this.#directory;
    const dir = held.reader ? (this.#permits as PermitFiles).readersPath(held.hash) : store.lockPath(held.hash);
    let next: Entry | undefined;
    try {
      await held.extending?.catch(() => undefined);
      next = await store.run(true, () =>
        store.moveEntry(dir, held.entry, duration, "hand off a lease in", held.entry.fence, true),
      );
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    }
    if (next === undefined) return performance.now() >= handle.validUntil ? "expired" : "taken";
    this.#held.delete(handle.token);
    handle.renew(startedAt, startedAt + duration);
    return "extended";
  }

  acquire(request: AttemptRequest): Promise<AttemptOutcome> {
    const { resource, duration, fencing } = request;
    const hash = this.#hashOf(resource);
    const concurrent = this.#attempting.get(resource) ?? 0;
    this.#attempting.set(resource, concurrent + 1);
    let attempt: Promise<AttemptOutcome>;
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
        const taking = this.#directory.use(() => this.#directory.store.take(hash, newToken(), duration, probe));
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
  async #acquireQueued(queue: LockQueue, hash: string, request: AttemptRequest): Promise<AttemptOutcome> {
    const { resource, duration, queueing, fencing } = request;
    const sentAt = performance.now();
    await this.#leaving.get(hash);
    const { store } = this.#directory;
    // First in line as last read (woken by the lock's release, most likely), a read younger than
    // its ticket: take at once, with no look at the queue or the lock. A miss reads the queue again
    // next time, and so does a waiter frozen past its ticket's lapse (others may have queued ahead).
    const head = queue.headTicket(hash, queueing.grantedToken);
    const look =
      head === undefined
        ? await this.#directory.use(() => queue.look(hash, queueing.grantedToken))
        : queue.lookAsHead(hash);
    let outcome: AttemptOutcome = { kind: "held" };
    if (look.ahead.length === 0) {
      const result = await this.#directory.use(() => store.take(hash, newToken(), duration, head === undefined));
      outcome = await this.#outcome(resource, hash, false, result, duration, fencing);
      if (outcome.kind === "acquired") {
        // Its ticket goes once the taker has resumed: its section does not wait for that.
        const own = look.own;
        void this.#leave(
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
  async #acquireCounted(permits: PermitFiles, hash: string, request: AttemptRequest): Promise<AttemptOutcome> {
    const { resource, duration, queueing, fencing, weight } = request;
    const writer = weight === this.#limit && weight > 1;
    const sentAt = performance.now();
    await this.#leaving.get(hash);
    const tickets = await this.#directory.use(() => permits.tickets(hash));
    const own = tickets.find((ticket) => ticket.entry.token === queueing.grantedToken);
    const before = own === undefined ? tickets : tickets.filter((ticket) => ahead(ticket, own));
    let outcome: AttemptOutcome = { kind: "held" };
    if (writer ? before.length === 0 : !before.some((ticket) => ticket.writer)) {
      outcome = writer
        ? await this.#takeWrite(permits, resource, hash, duration, fencing)
        : await this.#outcome(
            resource,
            hash,
            true,
            await permits.takeRead(hash, newToken(), duration),
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
  ): Promise<AttemptOutcome> {
    const { store } = this.#directory;
    const result = await store.take(hash, newToken(), duration, false);
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
  async #outcome(
    resource: string,
    hash: string,
    reader: boolean,
    result: TakeResult,
    duration: number,
    fencing: boolean,
  ): Promise<AttemptOutcome> {
    if (!result.taken || !fencing) return this.#settle(resource, hash, reader, result, duration);
    const { store } = this.#directory;
    const { entry } = result;
    let fencingToken: bigint;
    let confirmedAt: number;
    let confirmed: Entry | undefined;
    try {
      fencingToken = await store.nextFencingToken(hash);
      // Confirm the grant after the token: a holder that lost the lock meanwhile gets no token.
      confirmedAt = performance.now();
      confirmed = await store.extend(hash, entry, duration, fencingToken);
    } catch (error) {
      await store.release(hash, entry).catch(() => undefined);
      throw error;
    }
    if (confirmed === undefined) return { kind: "held" };
    return {
      kind: "acquired",
      handle: this.#hold(resource, hash, reader, confirmed, confirmedAt, duration),
      fencingToken,
    };
  }

  /**
   * {@link #outcome} without a fencing token, at once: a miss (with the holder's time left as the
   * retry hint), or the lease `result` took, now held here.
   */
  #settle(resource: string, hash: string, reader: boolean, result: TakeResult, duration: number): AttemptOutcome {
    if (!result.taken) {
      const { holder } = result;
      return holder === undefined
        ? { kind: "held" }
        : { kind: "held", retryAfterMs: Math.max(1, remainingMs(holder) + 2) };
    }
    return { kind: "acquired", handle: this.#hold(resource, hash, reader, result.entry, result.startedAt, duration) };
  }

  /** Records `entry`, taken at `startedAt` for `duration` ms, as held here: its handle. */
  #hold(
    resource: string,
    hash: string,
    reader: boolean,
    entry: Entry,
    startedAt: number,
    duration: number,
  ): LockHandle {
    this.#held.set(entry.token, { hash, reader, entry });
    return new LockHandle(entry.token, resource, startedAt, startedAt + duration);
  }

  extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    return Promise.all(handles.map((handle) => this.#extend(handle, duration)));
  }

  async #extend(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return "taken";
    if (performance.now() >= handle.validUntil) return "expired";
    const startedAt = performance.now();
    let next: Entry | undefined;
    try {
      held.extending = held.reader
        ? (this.#permits as PermitFiles).extendRead(held.hash, held.entry, duration)
        : this.#directory.store.extend(held.hash, held.entry, duration);
      next = await held.extending;
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    } finally {
      held.extending = undefined;
    }
    if (next === undefined) return performance.now() >= handle.validUntil ? "expired" : "taken";
    // Ours until the new deadline. (After a loss declared meanwhile, a release still finds the entry.)
    held.entry = next;
    handle.renew(startedAt, startedAt + duration);
    return "extended";
  }

  release(handle: LockHandle): Promise<ReleaseOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return Promise.resolve("expired");
    this.#held.delete(handle.token);
    // Past the deadline it is expired, even when its entry was still there to delete.
    const expired = performance.now() >= handle.validUntil;
    const removeEntry = (): Promise<ReleaseOutcome> => {
      const { hash, entry } = held;
      const releasing = held.reader
        ? (this.#permits as PermitFiles).releaseRead(hash, entry)
        : this.#directory.store.release(hash, entry);
      return this.#releaseDeadlines
        .run(releasing, releaseTimedOut)
        .then((outcome) => (expired ? "expired" : outcome), toUnknown);
    };
    // An extension in flight moves the entry: release the name it leaves (its own reaction, which
    // came first, has recorded it by then). None in flight: nothing to wait for.
    return held.extending === undefined ? removeEntry() : held.extending.then(removeEntry, removeEntry);
  }

  async leaveQueue(resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken === undefined) return;
    const hash = this.#hashOf(resource);
    const lockQueue = this.#lockQueue;
    await this.#leave(
      hash,
      lockQueue !== undefined
        ? lockQueue.leave(hash, undefined, grantedToken)
        : (this.#permits as PermitFiles).leave(hash, grantedToken),
    );
  }

  /**
   * Tracks `leaving`, a ticket leaving `hash`'s queue: the next attempt on the key here reads the
   * queue once it is done (else it would find its own old ticket ahead), and `close()` waits for it.
   */
  #leave(hash: string, leaving: Promise<void>): Promise<void> {
    const all = Promise.all([this.#leaving.get(hash), leaving.catch(() => undefined)]).then(() => {
      if (this.#leaving.get(hash) === all) this.#leaving.delete(hash);
    });
    this.#leaving.set(hash, all);
    this.#directory.store.tidy(all);
    return all;
  }

  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    const held = this.#held.get(handle.token);
    return held === undefined || held.reader ? undefined : this.#directory.store.nextFencingToken(held.hash);
  }
}

/** Resolves in the event loop's next check phase (after the callbacks and reactions now due). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** What a release that did not finish within {@link RELEASE_TIMEOUT_MS} rejects with. */
function releaseTimedOut(): Error {
  return new Error("release timed out");
}
