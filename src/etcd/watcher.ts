import type { BackendEvents, ReleaseWatcher } from "../backend.js";
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
  /** The first revision it hears, once etcd confirmed it (a reconnect resumes where it was). */
  from: bigint | undefined;
  /** The revision of the latest delete it heard (0 before any). */
  lastDelete: bigint;
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
  /** Told of every delete heard, before it is reported released (`key` without the namespace). */
  readonly deleted: (key: Buffer) => void;
  /** Runs when the watcher closes (the backend's own clean-up). */
  readonly onClose: () => Promise<void>;
}

/**
 * How an etcd locker hears releases: one etcd watch per key waited for or held here, on its
 * directory, for deletes only (a release, an expired or revoked lease's entries, a waiter leaving
 * the queue): each is told to the backend (a holder's entry deleted is a loss) and reported as
 * `released`. `etcd3` multiplexes the watches on one stream and resumes them from their last
 * revision after a reconnect; a reconnect is still reported as `missed` (every waiter tries once).
 * Reference-counted, waiters and holders alike; a watch etcd did not confirm leaves the key unheard
 * (the core's safety-net polling then wakes its waiters, and the next keepalive finds a revoked
 * lease).
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
    return this.#open(resource, undefined).ready;
  }

  /**
   * {@link watch} for a holder whose entry etcd had at revision `seenAt`: a new watch starts just
   * after it (etcd replays what came since). Resolves with whether a delete after `seenAt` may
   * have gone unheard — the watch was not confirmed, began later, or had already delivered such a
   * delete before this call (the holder was not listening yet) — so that the caller reads its
   * entry once instead. Pair it with {@link unwatch} as well.
   */
  watchHeld(resource: string, seenAt: bigint): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    const existing = this.#watches.get(resource);
    if (existing === undefined) {
      const watch = this.#open(resource, seenAt + 1n);
      return watch.ready.then(() => !covers(watch, seenAt));
    }
    existing.users += 1;
    const deliveredSince = existing.lastDelete > seenAt;
    return existing.ready.then(() => deliveredSince || !covers(existing, seenAt));
  }

  /** Opens the watch of `resource` (from revision `start`, or from now), with one user. */
  #open(resource: string, start: bigint | undefined): Watch {
    const { client, directoryOf, keyOf, timeoutMs, deleted } = this.#settings;
    const key = keyOf(resource);
    const builder = client.watch().prefix(directoryOf(resource)).only("delete");
    const watcher = (start === undefined ? builder : builder.startRevision(start.toString())).watcher();
    let confirm: () => void = ignore;
    const confirmed = new Promise<void>((resolve) => {
      confirm = resolve;
    });
    const watch: Watch = {
      watcher,
      users: 1,
      connected: false,
      ready: withTimeout(confirmed, timeoutMs, () => new Error("unconfirmed")).catch(ignore),
      from: undefined,
      lastDelete: 0n,
    };
    let everConnected = false;
    watcher.on("connected", (response) => {
      watch.connected = true;
      watch.from ??= start ?? startOf(response);
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
    watcher.on("delete", (kv) => {
      const revision = BigInt(kv.mod_revision);
      if (revision > watch.lastDelete) watch.lastDelete = revision;
      deleted(kv.key);
      this.#events.released(key);
    });
    this.#watches.set(resource, watch);
    return watch;
  }

  unwatch(resource: string): void {
    const watch = this.#watches.get(resource);
    if (watch === undefined) return;
    watch.users -= 1;
    if (watch.users > 0) return;
    this.#watches.delete(resource);
    void watch.watcher.cancel().catch(ignore);
  }

  /** Whether a watch of `resource` is open (confirmed or not): joining it costs nothing. */
  has(resource: string): boolean {
    return this.#watches.has(resource);
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

/** Whether `watch` hears every delete after revision `seenAt` (confirmed, and begun by then). */
function covers(watch: Watch, seenAt: bigint): boolean {
  return watch.from !== undefined && watch.from <= seenAt + 1n;
}

/**
 * The first revision a watch created without a start revision hears: etcd starts it just after
 * the store revision its creation answer carries (unknown without one: treated as begun too late).
 */
function startOf(response: unknown): bigint | undefined {
  const revision = (response as { header?: { revision?: unknown } } | undefined)?.header?.revision;
  return typeof revision === "string" || typeof revision === "number" ? BigInt(revision) + 1n : undefined;
}

function ignore(): void {}
