import { performance } from "node:perf_hooks";
import type { HeldEntry } from "./leases.js";
import type { EtcdReleaseWatcher } from "./watcher.js";

/**
 * How long a lock is held before it opens a watch of its own. A lock released sooner costs no
 * watch at all: opening and cancelling one for every lock (a create and a cancel on the watch
 * stream, and the stream itself when nothing else is watched) would cost more than the lock. A
 * watch opened later starts from the revision at which the entry was seen, so a delete in between
 * is still heard: late by this much, plus the time etcd takes to replay past events to a new watch
 * (it catches such watches up in a background loop).
 */
export const HOLDER_WATCH_DELAY_MS = 100;

/** A held entry waiting for its watch: the revision at which etcd had it, and since when (monotonic ms). */
interface Pending {
  readonly held: HeldEntry;
  readonly seenAt: string;
  readonly since: number;
}

/** What a {@link HeldWatch} needs. */
export interface HeldWatchSettings {
  /** The watcher the key's waiters use (one watch per directory, shared). */
  readonly watcher: EtcdReleaseWatcher;
  /** The watch may have missed `held`'s delete (see {@link EtcdReleaseWatcher.watchHeld}): read it once. */
  readonly unheard: (token: string, held: HeldEntry) => void;
}

/**
 * Which held entries the watcher listens for, so that a held entry deleted — by hand, or with
 * every key of its lease when the lease is revoked — is a loss at once rather than at the next
 * keepalive. A holder shares its directory's watch with the key's waiters: where one is open, it
 * joins at once (free); otherwise it opens one once held for {@link HOLDER_WATCH_DELAY_MS}. One
 * unref'ed timer serves every entry waiting for its watch.
 */
export class HeldWatch {
  readonly #settings: HeldWatchSettings;
  /** Tokens of the tracked entries (watched or pending), by their etcd key (latin1: a character per byte). */
  readonly #tokens = new Map<string, string>();
  /** Entries whose directory this watches for them, by token. */
  readonly #watched = new Map<string, HeldEntry>();
  /** Entries waiting for their watch, by token, oldest first. */
  readonly #pending = new Map<string, Pending>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(settings: HeldWatchSettings) {
    this.#settings = settings;
  }

  /**
   * Starts listening for the delete of `held` (its token `token`), which etcd had at revision
   * `seenAt`, held since `since` (monotonic ms: when its attempt was sent will do).
   */
  add(token: string, held: HeldEntry, seenAt: string, since: number): void {
    this.#tokens.set(held.key.toString("latin1"), token);
    if (this.#closed) return;
    if (this.#settings.watcher.has(held.resource)) this.#watch(token, held, seenAt);
    else {
      this.#pending.set(token, { held, seenAt, since });
      this.#arm();
    }
  }

  /** The token of the tracked entry with etcd key `key`, if any. */
  tokenOf(key: Buffer): string | undefined {
    return this.#tokens.get(key.toString("latin1"));
  }

  /** Stops listening for `held` (released, lost or handed off). */
  remove(token: string, held: HeldEntry): void {
    this.#tokens.delete(held.key.toString("latin1"));
    if (this.#pending.delete(token)) return;
    if (this.#watched.delete(token)) this.#settings.watcher.unwatch(held.resource);
  }

  /** Stops the timer and drops what waits for it (the watcher closes its watches itself). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#pending.clear();
  }

  #watch(token: string, held: HeldEntry, seenAt: string): void {
    this.#watched.set(token, held);
    void this.#settings.watcher.watchHeld(held.resource, BigInt(seenAt)).then((unheard) => {
      if (unheard && this.#watched.get(token) === held) this.#settings.unheard(token, held);
    });
  }

  /** Arms the timer for the oldest pending entry, unless it is armed. */
  #arm(): void {
    if (this.#timer !== undefined) return;
    const oldest = this.#pending.values().next();
    if (oldest.done === true) return;
    const delay = Math.max(0, oldest.value.since + HOLDER_WATCH_DELAY_MS - performance.now());
    this.#timer = setTimeout(() => this.#onTimer(), Math.ceil(delay));
    this.#timer.unref();
  }

  /** Opens the watches of the entries held long enough, then waits for the next one. */
  #onTimer(): void {
    this.#timer = undefined;
    const due = performance.now() - HOLDER_WATCH_DELAY_MS;
    for (const [token, pending] of this.#pending) {
      if (pending.since > due) break;
      this.#pending.delete(token);
      this.#watch(token, pending.held, pending.seenAt);
    }
    this.#arm();
  }
}
