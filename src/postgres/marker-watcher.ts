import type { ReleaseWatcher } from "../backend.js";
import type { ClosingHost } from "../sql/watcher-host.js";
import { lockId, markerOf } from "./keys.js";
import type { Session } from "./session.js";
import { MARK, UNMARK } from "./statements.js";

/** What a {@link MarkerWatcher} needs of its backend. */
export interface MarkerWatcherHost extends ClosingHost {
  /** The backend's live session, if any. */
  current(): Session | undefined;
  /** The live session, opened if there is none. */
  connect(resource: string): Promise<Session>;
  /** The first watcher of `resource` here arrived. */
  firstWatcher?(resource: string): void;
  /** The last watcher of `resource` here left. */
  lastWatcherLeft?(resource: string): void;
}

/**
 * How a PostgreSQL locker hears releases: watching a key is holding its waiter marker (a shared
 * advisory lock on the key's 64 bits as two `int4`) on the locker's session, reference-counted; a
 * release NOTIFYs the key on the locker's channel only while another session holds the marker, and
 * the session's `LISTEN` hears it. Markers die with their session: the backend calls
 * {@link sessionEnded} and {@link sessionOpened}, and they are taken again on the new one.
 */
export class MarkerWatcher implements ReleaseWatcher {
  readonly #host: MarkerWatcherHost;
  /** Watchers per resource. */
  readonly #watchers = new Map<string, number>();
  /** Resources whose marker the current session holds. */
  readonly #marked = new Set<string>();
  /** The marker change in flight per resource (one at a time). */
  readonly #syncing = new Map<string, Promise<void>>();

  constructor(host: MarkerWatcherHost) {
    this.#host = host;
  }

  watch(resource: string): Promise<void> {
    const count = (this.#watchers.get(resource) ?? 0) + 1;
    this.#watchers.set(resource, count);
    if (count === 1) this.#host.firstWatcher?.(resource);
    return this.#sync(resource);
  }

  unwatch(resource: string): void {
    const count = (this.#watchers.get(resource) ?? 1) - 1;
    if (count > 0) this.#watchers.set(resource, count);
    else {
      this.#watchers.delete(resource);
      this.#host.lastWatcherLeft?.(resource);
      void this.#sync(resource);
    }
  }

  /** True while anyone here watches `resource`. */
  isWatched(resource: string): boolean {
    return this.#watchers.has(resource);
  }

  isWatching(resource: string): boolean {
    return this.#marked.has(resource) && this.#host.current() !== undefined;
  }

  close(): Promise<void> {
    return this.#host.close();
  }

  /** The session ended: its markers are gone. */
  sessionEnded(): void {
    this.#marked.clear();
  }

  /** A new session: takes every watched key's marker on it. */
  sessionOpened(): void {
    for (const watched of this.#watchers.keys()) void this.#sync(watched);
  }

  /** Brings `resource`'s marker in line with its watchers (one change at a time per resource). */
  #sync(resource: string): Promise<void> {
    const next = (this.#syncing.get(resource) ?? Promise.resolve()).then(() => this.#reconcile(resource));
    this.#syncing.set(resource, next);
    void next.then(() => {
      if (this.#syncing.get(resource) === next) this.#syncing.delete(resource);
    });
    return next;
  }

  /** Never rejects: a marker that could not be taken leaves the key unheard (the core polls). */
  async #reconcile(resource: string): Promise<void> {
    const wanted = this.#watchers.has(resource) && !this.#host.closing();
    if (wanted === this.#marked.has(resource)) return;
    const marker = markerOf(lockId(resource));
    if (!wanted) {
      this.#marked.delete(resource);
      const session = this.#host.current();
      await session?.query(UNMARK, [...marker, session.token]).catch(() => undefined);
      return;
    }
    try {
      const session = await this.#host.connect(resource);
      await session.query(MARK, [...marker, session.token]);
      if (this.#host.current() === session) this.#marked.add(resource);
    } catch {
      // Unheard: the core's safety net polls.
    }
  }
}
