import { type FSWatcher, watch } from "node:fs";
import type { BackendEvents, ReleaseWatcher } from "../core/backend.js";

/**
 * Wake-ups for waiters of a lock directory: one `fs.watch` of the directory per locker, open only
 * while someone waits, that calls the subscribers of the key hash an event is about (the hash
 * starts every name of a key: a lock directory created, renamed or removed; see {@link FileStore}). The watcher does not keep the
 * process alive. An event without a file name, or a watcher error, wakes every subscriber (they
 * try again); a watcher that cannot be opened leaves them to their safety-net polling.
 */
export class DirectoryWatcher {
  readonly #directory: string;
  readonly #subscribers = new Map<string, Set<() => void>>();
  #watcher: FSWatcher | undefined;
  #count = 0;

  constructor(directory: string) {
    this.#directory = directory;
  }

  /** Whether a watcher is open now. */
  get watching(): boolean {
    return this.#watcher !== undefined;
  }

  /**
   * Calls `wake` on every event about a name starting with `name` and a dot (a key's hash) until the returned function is called. The watcher is
   * open (and sees events) when this returns, unless it could not be opened.
   */
  subscribe(name: string, wake: () => void): () => void {
    let set = this.#subscribers.get(name);
    if (set === undefined) {
      set = new Set();
      this.#subscribers.set(name, set);
    }
    set.add(wake);
    this.#count += 1;
    this.#open();
    let subscribed = true;
    return () => {
      if (!subscribed) return;
      subscribed = false;
      const current = this.#subscribers.get(name);
      if (current?.delete(wake) !== true) return;
      if (current.size === 0) this.#subscribers.delete(name);
      this.#count -= 1;
      if (this.#count === 0) this.close();
    };
  }

  /** Closes the watcher (subscriptions stay; the next subscribe reopens it). */
  close(): void {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    watcher?.close();
  }

  #open(): void {
    if (this.#watcher !== undefined) return;
    try {
      const watcher = watch(this.#directory, { persistent: false });
      watcher.on("change", (_event, filename) => this.#notify(filename));
      watcher.on("error", () => {
        if (this.#watcher === watcher) this.close();
        this.#notifyAll();
      });
      this.#watcher = watcher;
    } catch {
      // No watcher (unsupported file system, no inotify watches left): waiters poll.
    }
  }

  #notify(filename: string | Buffer | null): void {
    if (filename === null) {
      this.#notifyAll();
      return;
    }
    // Every name of a key starts with its hash and a dot (`H.lock`, `H.rd`, …).
    const name = filename.toString();
    const dot = name.indexOf(".");
    const set = this.#subscribers.get(dot < 0 ? name : name.slice(0, dot));
    if (set === undefined) return;
    for (const wake of [...set]) wake();
  }

  #notifyAll(): void {
    for (const set of [...this.#subscribers.values()]) for (const wake of [...set]) wake();
  }
}

/**
 * Hears releases through `fs.watch` on the lock directory ({@link DirectoryWatcher}): any event
 * about a watched key's names (its lock directory, its readers' directory) is passed on as
 * released. While anything is watched, one ref'ed timer keeps the process alive: the watcher and
 * the backoff timers do not (they must not hold up an idle process), but a caller waiting for a
 * lock held by another process is work in progress, like a pending request.
 */
export class FileReleaseWatcher implements ReleaseWatcher {
  readonly #directory: DirectoryWatcher;
  readonly #events: BackendEvents;
  readonly #hashOf: (key: string) => string;
  readonly #watched = new Map<string, { count: number; stop: () => void }>();
  readonly #onClose: () => Promise<void>;
  #keepAlive: NodeJS.Timeout | undefined;

  /**
   * @param onClose called by {@link close} (the backend's close): removes what the backend keeps
   * in the directory (the store's spare and emptied directories).
   */
  constructor(
    directory: string,
    events: BackendEvents,
    hashOf: (key: string) => string,
    onClose: () => Promise<void> = () => Promise.resolve(),
  ) {
    this.#directory = new DirectoryWatcher(directory);
    this.#events = events;
    this.#hashOf = hashOf;
    this.#onClose = onClose;
  }

  watch(resource: string): Promise<void> {
    let watched = this.#watched.get(resource);
    if (watched === undefined) {
      const stop = this.#directory.subscribe(this.#hashOf(resource), () => this.#events.released(resource));
      watched = { count: 0, stop };
      this.#watched.set(resource, watched);
    }
    watched.count += 1;
    this.#keepAlive ??= setInterval(() => undefined, 1 << 30);
    return Promise.resolve();
  }

  unwatch(resource: string): void {
    const watched = this.#watched.get(resource);
    if (watched === undefined || --watched.count > 0) return;
    watched.stop();
    this.#watched.delete(resource);
    if (this.#watched.size === 0) this.#stopKeepAlive();
  }

  isWatching(resource: string): boolean {
    return this.#watched.has(resource) && this.#directory.watching;
  }

  close(): Promise<void> {
    this.#directory.close();
    this.#stopKeepAlive();
    return this.#onClose();
  }

  #stopKeepAlive(): void {
    if (this.#keepAlive !== undefined) clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
  }
}
