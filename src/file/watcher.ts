import { type FSWatcher, watch } from "node:fs";
import type { BackendEvents, ReleaseWatcher } from "../backend.js";
import { getOrInsert } from "../internal/get-or-insert.js";

/**
 * Wake-ups for waiters of a lock directory: one `fs.watch` of the directory per locker, open only
 * while someone waits, that calls the subscribers of the key hash an event is about (the hash
 * starts every name of a key: a lock directory created, renamed or removed; see {@link FileStore}). The watcher does not keep the
 * process alive. An event without a file name, or a watcher error, wakes every subscriber (they
 * try again); a watcher that cannot be opened leaves them to their safety-net polling.
 */
export class DirectoryWatcher {
  readonly #directory: string;
  readonly #subscribers = new Map<string, Set<(name: string | undefined) => void>>();
  #watcher: FSWatcher | undefined;
  #count = 0;
  /** The close scheduled once nobody subscribes (see {@link #closeSoon}). */
  #closing: NodeJS.Immediate | undefined;

  constructor(directory: string) {
    this.#directory = directory;
  }

  /** Whether a watcher is open now. */
  get watching(): boolean {
    return this.#watcher !== undefined;
  }

  /**
   * Calls `wake` with the name of every event about a name starting with `name` and a dot (a key's
   * hash), and with `undefined` on every event without a name and every error of the watcher,
   * until the returned function is called. The watcher is open (and sees events) when this
   * returns, unless it could not be opened.
   */
  subscribe(name: string, wake: (name: string | undefined) => void): () => void {
    getOrInsert(this.#subscribers, name, () => new Set()).add(wake);
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
      if (this.#count === 0) this.#closeSoon();
    };
  }

  /**
   * Closes the watcher once the current callbacks are done (unless someone subscribes meanwhile):
   * removing an inotify watch is a slow system call, which the waiter that just took its key would
   * otherwise wait for before it resumes.
   */
  #closeSoon(): void {
    if (this.#closing !== undefined) return;
    this.#closing = setImmediate(() => {
      this.#closing = undefined;
      if (this.#count === 0) this.close();
    });
  }

  /** Closes the watcher (subscriptions stay; the next subscribe reopens it). */
  close(): void {
    if (this.#closing !== undefined) clearImmediate(this.#closing);
    this.#closing = undefined;
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
    for (const wake of [...set]) wake(name);
  }

  #notifyAll(): void {
    for (const set of [...this.#subscribers.values()]) for (const wake of [...set]) wake(undefined);
  }
}

/**
 * Hears releases through `fs.watch` on the lock directory ({@link DirectoryWatcher}): any event
 * about a watched key's names (its lock directory, its readers' directory) is passed on as
 * released, unless this locker waits behind another waiter's ticket for the key (see
 * `lock-queue.ts`, which then wakes it). While anything is watched, one ref'ed timer keeps the
 * process alive: the watcher and the backoff timers do not (they must not hold up an idle
 * process), but a caller waiting for a lock held by another process is work in progress, like a
 * pending request.
 */
export class FileReleaseWatcher implements ReleaseWatcher {
  readonly #directory: DirectoryWatcher;
  readonly #events: BackendEvents;
  readonly #hashOf: (key: string) => string;
  readonly #watched = new Map<string, { count: number; stop: () => void }>();
  readonly #onClose: () => Promise<void>;
  readonly #quiet: (hash: string, name: string) => boolean;
  #keepAlive: NodeJS.Timeout | undefined;

  /**
   * @param onClose called by {@link close} (the backend's close): removes what the backend keeps
   * in the directory (the store's spare and emptied directories).
   * @param quiet whether an event about `name`, a name of the key of `hash`, is not for this
   * locker's waiters (see `lock-queue.ts`: a waiter behind another's ticket is woken by the queue,
   * and the queue directory's own events say nothing of the lock); events without a name and
   * watcher errors are always passed on.
   */
  constructor(
    directory: string,
    events: BackendEvents,
    hashOf: (key: string) => string,
    onClose: () => Promise<void> = () => Promise.resolve(),
    quiet: (hash: string, name: string) => boolean = () => false,
  ) {
    this.#directory = new DirectoryWatcher(directory);
    this.#events = events;
    this.#hashOf = hashOf;
    this.#onClose = onClose;
    this.#quiet = quiet;
  }

  watch(resource: string): Promise<void> {
    let watched = this.#watched.get(resource);
    if (watched === undefined) {
      const hash = this.#hashOf(resource);
      const stop = this.#directory.subscribe(hash, (name) => {
        if (name === undefined || !this.#quiet(hash, name)) this.#events.released(resource);
      });
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
