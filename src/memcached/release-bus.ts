import type { BackendEvents, ReleaseWatcher } from "../backend.js";
import { getOrInsert } from "../internal/get-or-insert.js";
import type { KeyNames } from "./layout.js";
import type { MemcachedClient } from "./types.js";

/** A watcher's subscription to one item: how many waits share it, and the caller's key if known. */
interface Subscription {
  /** Waits sharing it. */
  count: number;
  /** The caller's key, to tell the core (`undefined`: a hashed item whose key was not remembered). */
  readonly key: string | undefined;
}

/** Who listens for releases of each item, per Memcached deployment (servers and namespace). */
const listeners = new Map<string, Map<string, Set<MemcachedReleaseWatcher>>>();

/**
 * The deployment a client talks to: its servers and namespace. Lockers of this process on clients
 * of the same deployment share an item's lock, so they hear one another's releases.
 */
export function deploymentOf(client: MemcachedClient): string {
  const servers = Array.isArray(client.servers) ? [...client.servers].sort() : [];
  return `${servers.join(",")} ${client.namespace ?? ""}`;
}

/** Hashed items the locker named lately, to the caller's key (to tell waiters which key was released). */
const REMEMBERED_HASHES = 1024;

/**
 * How a Memcached locker's waiters hear of releases. Memcached tells nobody that an item was
 * deleted, so this hears only the releases of lockers in this process on the same deployment
 * (any client of the same servers and namespace): a waiter here is woken as soon as such a release
 * is answered. A release in another process is found by the core's safety-net polling (the
 * holder's end, when the last attempt could read it; else the backoff).
 */
export class MemcachedReleaseWatcher implements ReleaseWatcher {
  readonly #deployment: string;
  readonly #names: KeyNames;
  readonly #events: BackendEvents;
  readonly #subscriptions = new Map<string, Subscription>();
  /** Hashed items named lately (see {@link remember}), oldest first. */
  readonly #hashed = new Map<string, string>();
  /** What the backend finishes when its locker closes. */
  readonly #onClose: () => Promise<void>;

  constructor(client: MemcachedClient, names: KeyNames, events: BackendEvents, onClose: () => Promise<void>) {
    this.#deployment = deploymentOf(client);
    this.#names = names;
    this.#events = events;
    this.#onClose = onClose;
  }

  /** Notes that `key` is named `resource` (kept for hashed items only, a bounded number). */
  remember(key: string, resource: string): void {
    if (this.#names.keyOf(resource) !== undefined) return;
    this.#hashed.delete(resource);
    this.#hashed.set(resource, key);
    if (this.#hashed.size > REMEMBERED_HASHES) this.#hashed.delete(this.#hashed.keys().next().value as string);
  }

  async watch(resource: string): Promise<void> {
    const subscription = this.#subscriptions.get(resource);
    if (subscription !== undefined) {
      subscription.count += 1;
      return;
    }
    this.#subscriptions.set(resource, { count: 1, key: this.#names.keyOf(resource) ?? this.#hashed.get(resource) });
    const byItem = getOrInsert(listeners, this.#deployment, () => new Map());
    getOrInsert(byItem, resource, () => new Set()).add(this);
  }

  unwatch(resource: string): void {
    const subscription = this.#subscriptions.get(resource);
    if (subscription === undefined) return;
    subscription.count -= 1;
    if (subscription.count > 0) return;
    this.#subscriptions.delete(resource);
    this.#leave(resource);
  }

  /** True while subscribed: no release in this process goes unheard (the only ones this hears). */
  isWatching(resource: string): boolean {
    return this.#subscriptions.has(resource);
  }

  async close(): Promise<void> {
    for (const resource of this.#subscriptions.keys()) this.#leave(resource);
    this.#subscriptions.clear();
    await this.#onClose();
  }

  /** Tells every other watcher of this deployment that `resource` was released here. */
  publish(resource: string): void {
    const watchers = listeners.get(this.#deployment)?.get(resource);
    if (watchers === undefined) return;
    for (const watcher of [...watchers]) if (watcher !== this) watcher.#released(resource);
  }

  #released(resource: string): void {
    const subscription = this.#subscriptions.get(resource);
    if (subscription === undefined) return;
    // A hashed item whose key was not remembered: every waiter here tries.
    if (subscription.key === undefined) this.#events.missed();
    else this.#events.released(subscription.key);
  }

  #leave(resource: string): void {
    const byItem = listeners.get(this.#deployment);
    const watchers = byItem?.get(resource);
    if (byItem === undefined || watchers === undefined) return;
    watchers.delete(this);
    if (watchers.size > 0) return;
    byItem.delete(resource);
    if (byItem.size === 0) listeners.delete(this.#deployment);
  }
}
