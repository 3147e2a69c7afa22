import type {
  AdoptRequest,
  AttemptOutcome,
  AttemptRequest,
  Backend,
  BackendFactory,
  Capabilities,
  ExtendOutcome,
  Fencing,
  HandOff,
  StoredHolder,
  StoredView,
  WaitQueue,
} from "../core/backend.js";
import { LockHandle } from "../core/backend.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { toUnknown } from "../internal/release-func.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { hashKey, type LockDirectory } from "./directory.js";
import { type Entry, remainingMs, takeable } from "./entry.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { readOwner } from "./owner.js";
import { PermitFiles, ticketEntry } from "./permits.js";
import { type Permit, SemaphoreFiles } from "./semaphore-files.js";
import { FileReleaseWatcher } from "./watcher.js";

/** How long a release may take before it reports `"unknown"` (the permits then expire on their own). */
const RELEASE_TIMEOUT_MS = 5000;

const HELD: AttemptOutcome = { kind: "held" };

/** Permits held here: the key's hash and the holder's entry as it now is. */
interface Held {
  readonly hash: string;
  readonly weight: number;
  entry: Entry;
  /** The extension in flight, if any: a release waits for it (it renames the entry). */
  extending?: Promise<Entry | undefined> | undefined;
}

/**
 * The key whose files a `FileSemaphore` names `key`'s: marked, so that a semaphore's files never
 * meet a lock's or a read-write key's of the same name (their hashes differ).
 */
export function semaphoreKey(key: string): string {
  return `\u0000sem\u0000${key}`;
}

/**
 * The backend of `FileSemaphore`: each holder an entry in its weight's directory, counted without
 * a lock (see `semaphore-files.ts`), and a waiting queue of tickets as a read-write key's
 * (`permits.ts`). Waiters are served strictly in arrival order across processes: only the first
 * ticket in line tries (a caller without a ticket tries only while nobody queues), so a heavy
 * waiter is never overtaken by lighter ones behind it. Releases grant nothing: a release, and
 * the departure of a ticket from the queue, is an event in the lock directory, which
 * {@link FileReleaseWatcher} hears through `fs.watch`; every waiter then reads the queue, and the
 * first in line tries. A miss answers the holders' soonest deadline as its retry hint (a stopped
 * holder's permits are taken over then).
 *
 * The resource of a key is the key itself (the watcher names it in its events); operations hash
 * it, marked as a semaphore's ({@link semaphoreKey}).
 *
 * @param limit permits per key.
 */
export function fileSemaphoreBackend(
  directory: LockDirectory,
  options: ResolvedFileLockerOptions,
  limit: number,
): BackendFactory {
  return ({ events }) => new FileSemaphoreBackend(directory, options, limit, events);
}

class FileSemaphoreBackend implements Backend, WaitQueue, Fencing, HandOff {
  readonly can: Capabilities;
  /** Handles name the lock directory: a handle adopts only in the directory it was handed off in. */
  readonly scope: string;
  readonly watcher: FileReleaseWatcher;
  readonly #directory: LockDirectory;
  readonly #files: SemaphoreFiles;
  readonly #queue: PermitFiles;
  readonly #limit: number;
  /** How long a waiter's ticket lasts unless refreshed (it is, at every attempt: backoff.max). */
  readonly #ticketTtl: number;
  /** Permits held here, by token. */
  readonly #held = new Map<string, Held>();
  /** Queue tickets being left, per key hash: an attempt reads the queue once they are gone. */
  readonly #leaving = new Map<string, Promise<void>>();
  /**
   * Per key hash, the end of the latest attempt here: this locker's attempts on a key run one after
   * another, in call order, so a caller that came later reads the queue once an earlier one that
   * missed has joined it (and two of them never race each other for the same permits).
   */
  readonly #turns = new Map<string, Promise<unknown>>();
  /** One coarse timer bounds every release in flight (see {@link RELEASE_TIMEOUT_MS}). */
  readonly #releaseDeadlines = new DeadlineGroup(RELEASE_TIMEOUT_MS, { inOrder: false });

  constructor(
    directory: LockDirectory,
    options: ResolvedFileLockerOptions,
    limit: number,
    events: Parameters<BackendFactory>[0]["events"],
  ) {
    this.#directory = directory;
    this.#limit = limit;
    this.#queue = new PermitFiles(directory.store);
    this.#files = new SemaphoreFiles(directory.store, this.#queue);
    this.#ticketTtl = Math.max(options.expiry, 3 * options.backoffMax + 1000);
    this.can = {
      permits: true,
      queue: this,
      fencing: this,
      handOff: this,
      listing: {
        unsupported: "lock files are named by a hash of the key and do not record it, so the key cannot be read back",
      },
    };
    this.scope = `file-semaphore:${options.directory}`;
    this.watcher = new FileReleaseWatcher(
      options.directory,
      events,
      (key) => this.#hashOf(key),
      () => directory.store.close(),
    );
  }

  /** The key {@link #hashOf} hashed last, and its hash: a key taken again and again is hashed once. */
  #lastKey: string | undefined;
  #lastHash = "";

  /** The file name stem of `key` (see {@link semaphoreKey}). */
  #hashOf(key: string): string {
    if (key === this.#lastKey) return this.#lastHash;
    const hash = hashKey(semaphoreKey(key));
    this.#lastKey = key;
    this.#lastHash = hash;
    return hash;
  }

  /** Waiters queue by tickets, and releases grant the key to nobody: the first in line tries. */
  grants(): boolean {
    return false;
  }

  /**
   * One attempt in queue order: it tries when its ticket is first in line, or (without one) when
   * nobody queues; a miss that joins the queue takes (or keeps) a ticket, whose token is its
   * registration. Taking the permits leaves the queue.
   */
  acquire(request: AttemptRequest): Promise<AttemptOutcome> {
    const hash = this.#hashOf(request.resource);
    const previous = this.#turns.get(hash);
    const attempt =
      previous === undefined ? this.#attempt(hash, request) : previous.then(() => this.#attempt(hash, request));
    const settled = attempt.catch(() => undefined);
    this.#turns.set(hash, settled);
    void settled.then(() => {
      if (this.#turns.get(hash) === settled) this.#turns.delete(hash);
    });
    return attempt;
  }

  async #attempt(hash: string, request: AttemptRequest): Promise<AttemptOutcome> {
    const { resource, duration, queueing, fencing, weight } = request;
    const sentAt = performance.now();
    await this.#leaving.get(hash);
    const tickets = await this.#directory.use(() => this.#queue.tickets(hash));
    const own = tickets.find((ticket) => ticket.entry.token === queueing.grantedToken);
    let outcome: AttemptOutcome = HELD;
    if (own === undefined ? tickets.length === 0 : tickets[0] === own) {
      const taken = await this.#files.take(hash, newToken(), weight, this.#limit, duration);
      if (taken.taken) {
        outcome = await this.#grant(resource, hash, weight, taken.entry, taken.startedAt, duration, fencing);
        if (outcome.kind === "acquired") {
          if (own !== undefined) await this.#leave(hash, this.#files.leave(hash, own));
          return outcome;
        }
      } else if (taken.retryAfterMs !== undefined) {
        outcome = { kind: "held", retryAfterMs: taken.retryAfterMs };
      }
    }
    if (!queueing.joinOnMiss) return outcome;
    const ticket = await this.#queue.register(hash, true, own?.entry.token ?? newToken(), this.#ticketTtl, own);
    return { ...outcome, kind: "held", registration: { token: ticket.entry.token, weight, sentAt, serverMs: 0 } };
  }

  /** Permits taken: held here, with a fencing token when asked (confirmed after it was drawn). */
  async #grant(
    resource: string,
    hash: string,
    weight: number,
    entry: Entry,
    startedAt: number,
    duration: number,
    fencing: boolean,
  ): Promise<AttemptOutcome> {
    if (!fencing) return { kind: "acquired", handle: this.#hold(resource, hash, weight, entry, startedAt, duration) };
    const { store } = this.#directory;
    let fencingToken: bigint;
    let confirmedAt: number;
    let confirmed: Entry | undefined;
    try {
      fencingToken = await store.nextFencingToken(hash);
      // Confirm the grant after the token: a holder whose entry was taken over meanwhile gets none.
      confirmedAt = performance.now();
      confirmed = await this.#files.fence(hash, { weight, entry }, duration, fencingToken);
    } catch (error) {
      await this.#files.release(hash, { weight, entry }).catch(() => undefined);
      throw error;
    }
    if (confirmed === undefined) return HELD;
    return {
      kind: "acquired",
      handle: this.#hold(resource, hash, weight, confirmed, confirmedAt, duration),
      fencingToken,
    };
  }

  /** Records `entry`, taken at `startedAt` for `duration` ms, as held here: its handle. */
  #hold(resource: string, hash: string, weight: number, entry: Entry, startedAt: number, duration: number): LockHandle {
    this.#held.set(entry.token, { hash, weight, entry });
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
      held.extending = this.#files.extend(held.hash, held, duration);
      next = await held.extending;
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    } finally {
      held.extending = undefined;
    }
    if (next === undefined) return performance.now() >= handle.validUntil ? "expired" : "taken";
    held.entry = next;
    handle.renew(startedAt, startedAt + duration);
    return "extended";
  }

  release(handle: LockHandle): Promise<ReleaseOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return Promise.resolve("expired");
    this.#held.delete(handle.token);
    const expired = performance.now() >= handle.validUntil;
    const remove = (): Promise<ReleaseOutcome> =>
      this.#releaseDeadlines
        .run(this.#files.release(held.hash, held), releaseTimedOut)
        .then((outcome) => (expired ? "expired" : outcome), toUnknown);
    // An extension in flight renames the entry: remove the name it leaves.
    return held.extending === undefined ? remove() : held.extending.then(remove, remove);
  }

  async leaveQueue(resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken === undefined) return;
    const hash = this.#hashOf(resource);
    await this.#leave(hash, this.#files.leaveByToken(hash, grantedToken));
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

  /**
   * The live holders of `resource` (with their weights) and its live queue tickets, read without
   * changing anything; time left as the store measures it (see `remainingMs`).
   */
  async inspect(resource: string): Promise<StoredView> {
    const hash = this.#hashOf(resource);
    const { store } = this.#directory;
    const [permits, tickets] = await Promise.all([
      this.#files.held(hash),
      store.entries(this.#queue.queuePath(hash), ticketEntry),
    ]);
    const holders = await Promise.all(permits.map((permit) => this.#describe(permit)));
    return { holders, waiting: tickets.filter((ticket) => !takeable(ticket)).length };
  }

  async #describe({ weight, entry }: Permit): Promise<StoredHolder> {
    const owner = await readOwner(this.#directory.store.directory, entry.owner);
    const expiresInMs = Math.max(0, remainingMs(entry));
    return entry.fence === undefined
      ? { owner, weight, expiresInMs }
      : { owner, weight, expiresInMs, fencingToken: entry.fence };
  }

  /**
   * Takes over a handed-off lease: renames its entry (in its weight's directory) to one of this
   * locker's, in one rename: of two adopters of one handle, the second finds it gone.
   */
  async adopt({ resource, token, weight, duration }: AdoptRequest): Promise<LockHandle | "taken" | "expired"> {
    const hash = this.#hashOf(resource);
    const { store } = this.#directory;
    const dir = this.#files.weightPath(hash, weight);
    const result = await this.#directory.use(() => store.adoptEntry(dir, token, newToken(), duration));
    if (typeof result === "string") return result;
    return this.#hold(resource, hash, weight, result.entry, result.startedAt, duration);
  }

  /**
   * Extends `handle` once for a hand-off, with an entry that names no process (the one handing it
   * off may exit before it is adopted), and forgets it here.
   */
  async detach(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return "taken";
    if (performance.now() >= handle.validUntil) return "expired";
    const startedAt = performance.now();
    let next: Entry | undefined;
    try {
      await held.extending?.catch(() => undefined);
      next = await this.#files.detach(held.hash, held, duration);
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    }
    if (next === undefined) return performance.now() >= handle.validUntil ? "expired" : "taken";
    this.#held.delete(handle.token);
    handle.renew(startedAt, startedAt + duration);
    return "extended";
  }

  /** A fencing token for a holder of every permit (a semaphore of limit 1: the core allows no other). */
  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    const held = this.#held.get(handle.token);
    if (held === undefined || held.weight < this.#limit) return undefined;
    return this.#directory.store.nextFencingToken(held.hash);
  }
}

/** What a release that did not finish within {@link RELEASE_TIMEOUT_MS} rejects with. */
function releaseTimedOut(): Error {
  return new Error("release timed out");
}
