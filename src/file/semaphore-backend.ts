import type * as contract from "../backend.js";
import { newToken } from "../internal/token.js";
import { FileBackendBase, type KeyLook } from "./backend-base.js";
import { KeyHashes, type LockDirectory } from "./directory.js";
import type { Entry } from "./entry.js";
import type { HeldEntry } from "./held-entries.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { PermitFiles, ticketEntry } from "./permits.js";
import { SemaphoreFiles } from "./semaphore-files.js";

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
 * `FileReleaseWatcher` hears through `fs.watch`; every waiter then reads the queue, and the
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

class FileSemaphoreBackend extends FileBackendBase {
  readonly #files: SemaphoreFiles;
  readonly #queue: PermitFiles;
  readonly #limit: number;
  /**
   * Per key hash, the end of the latest attempt here: this locker's attempts on a key run one after
   * another, in call order, so a caller that came later reads the queue once an earlier one that
   * missed has joined it (and two of them never race each other for the same permits).
   */
  readonly #turns = new Map<string, Promise<unknown>>();

  constructor(
    directory: LockDirectory,
    options: ResolvedFileLockerOptions,
    limit: number,
    events: contract.BackendEvents,
  ) {
    const { store } = directory;
    super(directory, options, {
      scope: `file-semaphore:${options.directory}`,
      hashes: new KeyHashes(semaphoreKey),
      permits: true,
      places: ["sem"],
      events,
      onClose: () => store.close(),
    });
    this.#limit = limit;
    this.#queue = new PermitFiles(store);
    this.#files = new SemaphoreFiles(store, this.#queue);
  }

  /**
   * One attempt in queue order: it tries when its ticket is first in line, or (without one) when
   * nobody queues; a miss that joins the queue takes (or keeps) a ticket, whose token is its
   * registration. Taking the permits leaves the queue.
   */
  acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const hash = this.hashes.of(request.resource);
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
    await this.departures.of(hash);
    const tickets = await this.directory.use(() => this.#queue.tickets(hash));
    const own = tickets.find((ticket) => ticket.entry.token === queueing.grantedToken);
    let outcome: contract.AttemptOutcome = HELD;
    if (own === undefined ? tickets.length === 0 : tickets[0] === own) {
      const keyField = this.keyFields.of(resource, hash);
      const taken = await this.#files.take(hash, newToken(), weight, this.#limit, duration, keyField);
      if (taken.taken) {
        const held = this.heldLease(hash, weight, taken.entry);
        outcome = fencing
          ? await this.held.holdFenced(resource, held, duration, this.directory.store)
          : { kind: "acquired", handle: this.held.hold(resource, held, taken.startedAt, duration) };
        if (outcome.kind === "acquired") {
          if (own !== undefined) await this.departures.track(hash, this.#files.leave(hash, own));
          return outcome;
        }
      } else if (taken.retryAfterMs !== undefined) {
        outcome = { kind: "held", retryAfterMs: taken.retryAfterMs };
      }
    }
    if (!queueing.joinOnMiss) return outcome;
    const ticket = await this.#queue.register(hash, true, own?.entry.token ?? newToken(), this.ticketTtl, own);
    return { ...outcome, kind: "held", registration: { token: ticket.entry.token, weight, sentAt, serverMs: 0 } };
  }

  /** Leaves the queue (see `semaphore-files.ts`). */
  protected leaveTicket(hash: string, token: string): Promise<void> {
    return this.#files.leaveByToken(hash, token);
  }

  /** The live holders (with their weights; see `semaphore-files.ts`) and the queue tickets. */
  protected async look(hash: string): Promise<KeyLook> {
    const { store } = this.directory;
    const [holders, tickets] = await Promise.all([
      this.#files.held(hash),
      store.entries(this.#queue.queuePath(hash), ticketEntry),
    ]);
    return { holders, tickets };
  }

  /** `H.sem`: the holders' entries. */
  protected async placeEntries(hash: string): Promise<Entry[]> {
    return (await this.#files.held(hash)).map((permit) => permit.entry);
  }

  /** The directory of the lease's weight. */
  protected entryDirectory(hash: string, weight: number): string {
    return this.#files.weightPath(hash, weight);
  }

  protected heldLease(hash: string, weight: number, entry: Entry): HeldEntry {
    return { hash, weight, entry, place: this.#files };
  }

  /** A fencing token for a holder of every permit (a semaphore of limit 1: the core allows no other). */
  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const held = this.held.get(handle.token);
    if (held === undefined || held.weight < this.#limit) return undefined;
    return this.directory.store.nextFencingToken(held.hash);
  }
}
