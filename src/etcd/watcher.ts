import type { BackendEvents, ReleaseWatcher } from "../core/backend.js";
import { withTimeout } from "../internal/sleep.js";
import type { EtcdClient, EtcdWatcher } from "./types.js";

/** One watched key: its etcd watch and who uses it. */
interface Watch {
  readonly watcher: EtcdWatcher;
  users: number;
  /** True while etcd confirmed the watch and it has not disconnected since. */
  connected: boolean;
  /** Resolves once connected (or failed): what `watch` waits for. */
  readonly ready: Promise<void>;
}

/** What an {@link EtcdReleaseWatcher} needs. */
export interface EtcdWatchSettings {
  /** The client's watch builder. */
  readonly client: EtcdClient;
  /** The etcd directory of a resource, without the client's namespace (the builder adds it). */
  readonly directoryOf: (resource: string) => string;
  /** The caller's key of a resource (what `released` names). */
  readonly keyOf: (resource: string) => string;
  /** How long `watch` waits for etcd to confirm a watch. */
  readonly timeoutMs: number;
  /** Runs when the watcher closes (the backend's own clean-up). */
  readonly onClose: () => Promise<void>;
}

/**
 * How an etcd locker hears releases: one etcd watch per waited-for key, on its directory, for
 * deletes only (a release, an expired lease's entries, a waiter leaving the queue): each is
 * reported as `released`. `etcd3` multiplexes the watches on one stream and resumes them from
 * their last revision after a reconnect; a reconnect is still reported as `missed` (every waiter
 * tries once). Reference-counted; a watch etcd did not confirm leaves the key unheard (the core's
 * safety-net polling then wakes its waiters).
 */
export class EtcdReleaseWatcher implements ReleaseWatcher {
  readonly #settings: EtcdWatchSettings;
  readonly #events: BackendEvents;
  readonly #watches = new Map<string, Watch>();
  #closed = false;

  constructor(settings: EtcdWatchSettings, events: BackendEvents) {
    this.#settings = settings;
    this.#events = events;
  }

  watch(resource: string): Promise<void> {
    const existing = this.#watches.get(resource);
    if (existing !== undefined) {
      existing.users += 1;
      return existing.ready;
    }
    if (this.#closed) return Promise.resolve();
    const { client, directoryOf, keyOf, timeoutMs } = this.#settings;
    const key = keyOf(resource);
    const watcher = client.watch().prefix(directoryOf(resource)).only("delete").watcher();
    let confirm: () => void = ignore;
    const confirmed = new Promise<void>((resolve) => {
      confirm = resolve;
    });
    const watch: Watch = {
      watcher,
      users: 1,
      connected: false,
      ready: withTimeout(confirmed, timeoutMs, () => new Error("unconfirmed")).catch(ignore),
    };
    let everConnected = false;
    watcher.on("connected", () => {
      watch.connected = true;
      confirm();
      // A reconnect: etcd3 resumes from the last revision, but say so anyway (waiters try once).
      if (everConnected) this.#events.missed();
      everConnected = true;
    });
    watcher.on("disconnected", () => {
      watch.connected = false;
    });
    watcher.on("error", () => {
      watch.connected = false;
    });
    watcher.on("delete", () => this.#events.released(key));
    this.#watches.set(resource, watch);
    return watch.ready;
  }

  unwatch(resource: string): void {
    const watch = this.#watches.get(resource);
    if (watch === undefined) return;
    watch.users -= 1;
    if (watch.users > 0) return;
    this.#watches.delete(resource);
    void watch.watcher.cancel().catch(ignore);
  }

  isWatching(resource: string): boolean {
    return this.#watches.get(resource)?.connected === true;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const cancelling = Array.from(this.#watches.values(), (watch) => watch.watcher.cancel().catch(ignore));
    this.#watches.clear();
    await Promise.all([...cancelling, this.#settings.onClose()]);
  }
}

function ignore(): void {}
