import type * as contract from "../core/backend.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { Departures } from "./departures.js";
import { KeyHashes, type LockDirectory } from "./directory.js";
import { takeable } from "./entry.js";
import { HeldEntries } from "./held-entries.js";
import { KeyFields } from "./key-field.js";
import { listKeys } from "./listing.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { storedHolder } from "./owner.js";
import { PermitFiles, ticketEntry } from "./permits.js";
import { SemaphoreFiles } from "./semaphore-files.js";
import { FileReleaseWatcher } from "./watcher.js";

const HELD: contract.AttemptOutcome = { kind: "held" };

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
): contract.BackendFactory {
  return ({ events }) => new FileSemaphoreBackend(directory, options, limit, events);
}

class FileSemaphoreBackend
  implements contract.Backend, contract.WaitQueue, contract.Fencing, contract.HandOff, contract.Listing
{
  readonly can: contract.Capabilities;
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
  readonly #held = new HeldEntries();
  /** Queue tickets being left, per key hash: an attempt reads the queue once they are gone. */
  readonly #departures: Departures;
  /**
   * Per key hash, the end of the latest attempt here: this locker's attempts on a key run one after
   * another, in call order, so a caller that came later reads the queue once an earlier one that
   * missed has joined it (and two of them never race each other for the same permits).
   */
  readonly #turns = new Map<string, Promise<unknown>>();
  /** The file name stems of keys (see {@link semaphoreKey}). */
  readonly #hashes = new KeyHashes(semaphoreKey);
  /** What the entries record of their key (see `key-field.ts`). */
  readonly #keyFields: KeyFields;

  constructor(
    directory: LockDirectory,
    options: ResolvedFileLockerOptions,
    limit: number,
    events: contract.BackendEvents,
  ) {
    const { store } = directory;
    this.#directory = directory;
    this.#limit = limit;
    this.#queue = new PermitFiles(store);
    this.#files = new SemaphoreFiles(store, this.#queue);
    this.#departures = new Departures(store);
    this.#ticketTtl = Math.max(options.expiry, 3 * options.backoffMax + 1000);
    this.can = { permits: true, queue: this, fencing: this, handOff: this, listing: this };
    this.#keyFields = new KeyFields(store);
    this.scope = `file-semaphore:${options.directory}`;
    this.watcher = new FileReleaseWatcher(
      options.directory,
      events,
      (key) => this.#hashes.of(key),
      () => store.close(),
    );
  }

  /**
   * One attempt in queue order: it tries when its ticket is first in line, or (without one) when
   * nobody queues; a miss that joins the queue takes (or keeps) a ticket, whose token is its
   * registration. Taking the permits leaves the queue.
   */
  acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const hash = this.#hashes.of(request.resource);
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

  async #attempt(hash: string, request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const { resource, duration, queueing, fencing, weight } = request;
    const sentAt = performance.now();
    await this.#departures.of(hash);
    const tickets = await this.#directory.use(() => this.#queue.tickets(hash));
    const own = tickets.find((ticket) => ticket.entry.token === queueing.grantedToken);
    let outcome: contract.AttemptOutcome = HELD;
    if (own === undefined ? tickets.length === 0 : tickets[0] === own) {
      const keyField = this.#keyFields.of(resource, hash);
      const taken = await this.#files.take(hash, newToken(), weight, this.#limit, duration, keyField);
      if (taken.taken) {
        const held = { hash, weight, entry: taken.entry, place: this.#files };
        outcome = fencing
          ? await this.#held.holdFenced(resource, held, duration, this.#directory.store)
          : { kind: "acquired", handle: this.#held.hold(resource, held, taken.startedAt, duration) };
        if (outcome.kind === "acquired") {
          if (own !== undefined) await this.#departures.track(hash, this.#files.leave(hash, own));
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

  extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    return this.#held.extend(handles, duration);
  }

  release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    return this.#held.release(handle);
  }

  async leaveQueue(resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken === undefined) return;
    const hash = this.#hashes.of(resource);
    await this.#departures.track(hash, this.#files.leaveByToken(hash, grantedToken));
  }

  /**
   * The live holders of `resource` (with their weights) and its live queue tickets, read without
   * changing anything; time left as the store measures it (see `remainingMs`).
   */
  inspect(resource: string): Promise<contract.StoredView> {
    return this.#view(this.#hashes.of(resource));
  }

  /** Up to `limit` held keys that start with `prefix` (see `listing.ts`): `H.sem`, each as {@link inspect} shows it. */
  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    return listKeys(
      this.#directory.store,
      {
        places: ["sem"],
        mark: semaphoreKey,
        entries: async (hash) => (await this.#files.held(hash)).map((permit) => permit.entry),
        view: (hash) => this.#view(hash),
      },
      prefix,
      limit,
    );
  }

  /** {@link inspect} of the key whose files are named by `hash`. */
  async #view(hash: string): Promise<contract.StoredView> {
    const { store } = this.#directory;
    const [permits, tickets] = await Promise.all([
      this.#files.held(hash),
      store.entries(this.#queue.queuePath(hash), ticketEntry),
    ]);
    const holders = await Promise.all(permits.map(({ weight, entry }) => storedHolder(store.directory, entry, weight)));
    return { holders, waiting: tickets.filter((ticket) => !takeable(ticket)).length };
  }

  /**
   * Takes over a handed-off lease: renames its entry (in its weight's directory) to one of this
   * locker's, in one rename: of two adopters of one handle, the second finds it gone.
   */
  async adopt({
    resource,
    token,
    weight,
    duration,
  }: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const hash = this.#hashes.of(resource);
    const { store } = this.#directory;
    const dir = this.#files.weightPath(hash, weight);
    const keyField = this.#keyFields.of(resource, hash);
    const result = await this.#directory.use(() => store.adoptEntry(dir, token, newToken(), duration, keyField));
    if (typeof result === "string") return result;
    const held = { hash, weight, entry: result.entry, place: this.#files };
    return this.#held.hold(resource, held, result.startedAt, duration);
  }

  /** Extends `handle` once for a hand-off, and forgets it here (see `HeldEntries.detach`). */
  detach(handle: contract.LockHandle, duration: number): Promise<contract.ExtendOutcome> {
    return this.#held.detach(handle, duration);
  }

  /** A fencing token for a holder of every permit (a semaphore of limit 1: the core allows no other). */
  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const held = this.#held.get(handle.token);
    if (held === undefined || held.weight < this.#limit) return undefined;
    return this.#directory.store.nextFencingToken(held.hash);
  }
}
