import { withTimeout } from "../internal/sleep.js";
import type { RedisClient } from "./types.js";

/**
 * Wake-on-release over Redis pub/sub. One subscriber connection per node, duplicated from the
 * caller's client on first use and shared by every waiter of the locker; a channel is subscribed
 * while at least one local waiter needs it. Subscribing never fails a lock: if no subscriber can
 * be reached, waiters fall back on their backoff.
 */
export class ReleaseNotifier {
  readonly #clients: readonly RedisClient[];
  readonly #onRelease: (channel: string) => void;
  readonly #onResubscribed: () => void;
  readonly #timeoutMs: number;
  readonly #channels = new Map<string, { refs: number; ready: Promise<void> }>();
  #subscribers: RedisClient[] | undefined;
  #closed = false;

  /**
   * @param onRelease called with the channel (the full Redis key) of every release message.
   * @param onResubscribed called when a subscriber reconnected: messages may have been missed.
   */
  constructor(
    clients: readonly RedisClient[],
    timeoutMs: number,
    onRelease: (channel: string) => void,
    onResubscribed: () => void,
  ) {
    this.#clients = clients;
    this.#timeoutMs = timeoutMs;
    this.#onRelease = onRelease;
    this.#onResubscribed = onResubscribed;
  }

  /**
   * Starts listening on `channel` (reference-counted) and resolves once at least one node confirmed
   * the subscription, or the timeout passed. Pair every call with {@link unsubscribe}.
   */
  subscribe(channel: string): Promise<void> {
    const existing = this.#channels.get(channel);
    if (existing !== undefined) {
      existing.refs += 1;
      return existing.ready;
    }
    if (this.#closed) return Promise.resolve();
    const subscribers = this.#ensureSubscribers();
    const confirmations = subscribers.map((subscriber) =>
      withTimeout(subscriber.subscribe(channel), this.#timeoutMs, () => new Error("subscribe timed out")),
    );
    const ready = Promise.any(confirmations).then(
      () => undefined,
      () => undefined,
    );
    this.#channels.set(channel, { refs: 1, ready });
    return ready;
  }

  /** Drops one reference to `channel`; the last one unsubscribes. */
  unsubscribe(channel: string): void {
    const entry = this.#channels.get(channel);
    if (entry === undefined) return;
    entry.refs -= 1;
    if (entry.refs > 0) return;
    this.#channels.delete(channel);
    for (const subscriber of this.#subscribers ?? []) {
      subscriber.unsubscribe(channel).catch(() => undefined);
    }
  }

  /** Number of channels currently subscribed (for tests and diagnostics). */
  get channelCount(): number {
    return this.#channels.size;
  }

  /** Disconnects the subscriber connections this notifier created. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#channels.clear();
    const subscribers = this.#subscribers ?? [];
    this.#subscribers = [];
    for (const subscriber of subscribers) subscriber.disconnect();
  }

  #ensureSubscribers(): RedisClient[] {
    if (this.#subscribers !== undefined) return this.#subscribers;
    this.#subscribers = this.#clients.map((client) => {
      const subscriber = (client as { duplicate(): RedisClient }).duplicate();
      // Connection errors surface as lost wake-ups (covered by backoff), never as crashes.
      subscriber.on("error", () => undefined);
      subscriber.on("message", (channel: string) => this.#onRelease(channel));
      let connectedBefore = false;
      subscriber.on("ready", () => {
        if (connectedBefore) this.#onResubscribed();
        connectedBefore = true;
      });
      return subscriber;
    });
    return this.#subscribers;
  }
}
