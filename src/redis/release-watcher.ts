import type { BackendEvents, Grant, ReleaseWatcher } from "../backend.js";
import { ReleaseNotifier } from "./release-notifier.js";
import type { RedisClient } from "./types.js";

/** Settings of a {@link RedisReleaseWatcher}. */
export interface RedisReleaseWatcherSettings {
  /** How long a subscription may take to be confirmed, in ms. */
  readonly timeoutMs: number;
  /** How long an unused channel stays subscribed, in ms. */
  readonly lingerMs: number;
  /** The lockers' key prefix: channels of other prefixes are not ours. */
  readonly prefix: string;
  /** The channel releases tell this locker of grants on (see SingleNodeStore). */
  readonly grantChannel: string;
  /** True when releases of a resource grant it through the grant queue (see Backend.hasQueue). */
  readonly hasQueue: (resource: string) => boolean;
}

/**
 * Hears Redis releases over pub/sub ({@link ReleaseNotifier}) and tells the core what they mean.
 * A resource with a grant queue is heard on the locker's own grant channel, where every
 * message is a grant "g:<waiter id>:<token>:<server ms>:<resource>"; a resource without one (a
 * quorum, a Cluster key with no hash tag) on its own channel, where a release publishes the token
 * it released (every node of a quorum the same one: {@link ReleaseNotifier} passes it on once).
 */
export class RedisReleaseWatcher implements ReleaseWatcher {
  readonly #notifier: ReleaseNotifier;
  readonly #settings: RedisReleaseWatcherSettings;

  constructor(clients: readonly RedisClient[], settings: RedisReleaseWatcherSettings, events: BackendEvents) {
    this.#settings = settings;
    this.#notifier = new ReleaseNotifier(
      clients,
      settings,
      (channel, message) => this.#onMessage(events, channel, message),
      () => events.missed(),
    );
  }

  watch(resource: string): Promise<void> {
    return this.#notifier.subscribe(this.#channelOf(resource));
  }

  unwatch(resource: string): void {
    this.#notifier.unsubscribe(this.#channelOf(resource));
  }

  isWatching(resource: string): boolean {
    return this.#notifier.isListening(this.#channelOf(resource));
  }

  close(): Promise<void> {
    return this.#notifier.close();
  }

  #channelOf(resource: string): string {
    return this.#settings.hasQueue(resource) ? this.#settings.grantChannel : resource;
  }

  #onMessage(events: BackendEvents, channel: string, message: string): void {
    const { prefix, grantChannel } = this.#settings;
    if (channel === grantChannel) {
      const parsed = parseGrant(message);
      if (parsed?.resource.startsWith(prefix)) {
        events.granted(parsed.resource.slice(prefix.length), parsed.grant);
      }
      return;
    }
    // A release where there is no grant queue publishes its token on the key's channel (a
    // locker of an earlier version: ""): anyone may try.
    if (channel.startsWith(prefix)) events.released(channel.slice(prefix.length));
  }
}

/**
 * The one parser of a grant message "g:<waiter id>:<token>:<server ms>:<resource>" (the resource
 * may itself contain colons); undefined when the message is not one.
 */
export function parseGrant(message: string): { grant: Grant; resource: string } | undefined {
  if (!message.startsWith("g:")) return undefined;
  const idEnd = message.indexOf(":", 2);
  const tokenEnd = idEnd < 0 ? -1 : message.indexOf(":", idEnd + 1);
  const msEnd = tokenEnd < 0 ? -1 : message.indexOf(":", tokenEnd + 1);
  if (msEnd < 0) return undefined;
  const serverMs = Number(message.slice(tokenEnd + 1, msEnd));
  if (!Number.isFinite(serverMs)) return undefined;
  return {
    grant: { waiterId: message.slice(2, idEnd), token: message.slice(idEnd + 1, tokenEnd), serverMs },
    resource: message.slice(msEnd + 1),
  };
}
