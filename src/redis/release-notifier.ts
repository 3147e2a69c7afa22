import { withTimeout } from "../internal/sleep.js";
import { connectionOf } from "./client/connection-of.js";
import type { RedisConnection, SubscriberConnection } from "./client/redis-connection.js";
import type { RedisClient } from "./types.js";

/** One subscribed channel: who needs it, and whether a node confirmed it. */
interface Channel {
  refs: number;
  readonly ready: Promise<void>;
  confirmed: boolean;
  /** When its last user left (monotonic ms); meaningful while `refs` is 0. */
  idleSince: number;
  /** The latest messages heard on it (at most {@link RECENT}), newest last. */
  readonly recent: string[];
}

/**
 * How many of a channel's latest messages a repeat is looked for among: a node's message about
 * one release may arrive after another node's about the next.
 */
const RECENT = 4;

/**
 * Wake-on-release over Redis pub/sub. One subscriber connection per node, duplicated from the
 * caller's client (ioredis or node-redis: see RedisConnection) on first use and shared by every
 * waiter of the locker. A channel is subscribed while at least one local waiter needs it, and
 * lingers a little after the last one leaves, so a key that is contended again and again is not
 * re-subscribed every time. Subscribing never fails a lock: if no subscriber can be reached,
 * waiters fall back on their safety-net polling.
 *
 * A message equal to one of the last few heard on its channel is dropped: every node of a quorum
 * publishes the same release (its token), and passing on each would make every waiter try once
 * per node — its later tries all lost to whoever took the key, and came in lock-step with the
 * others' (the bench's quorum scenario: 5.0–5.6 failed attempts per critical section with three
 * waiters on five nodes, 3.0–3.1 without them). Releases and grants are never repeated otherwise:
 * every lock has a token of its own, and an empty message (a locker of an earlier version) is
 * always passed on.
 */
export class ReleaseNotifier {
  readonly #connections: readonly RedisConnection[];
  readonly #onRelease: (channel: string, message: string) => void;
  readonly #onResubscribed: () => void;
  readonly #timeoutMs: number;
  readonly #lingerMs: number;
  readonly #channels = new Map<string, Channel>();
  /** Unsubscribes channels idle for the linger; armed while any channel is idle. */
  #lingerTimer: NodeJS.Timeout | undefined;
  #subscribers: SubscriberConnection[] | undefined;
  #closed = false;

  /**
   * @param onRelease called with the channel (a locker's grant channel, or the full Redis key of a
   *   lock without a grant queue) and message of every release.
   * @param onResubscribed called when a subscriber reconnected: messages may have been missed.
   */
  constructor(
    clients: readonly RedisClient[],
    settings: { timeoutMs: number; lingerMs: number },
    onRelease: (channel: string, message: string) => void,
    onResubscribed: () => void,
  ) {
    this.#connections = clients.map(connectionOf);
    this.#timeoutMs = settings.timeoutMs;
    this.#lingerMs = settings.lingerMs;
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
    const confirmations = this.#ensureSubscribers().map((subscriber) =>
      withTimeout(subscriber.subscribe(channel), this.#timeoutMs, () => new Error("subscribe timed out")),
    );
    const entry: Channel = {
      refs: 1,
      confirmed: false,
      idleSince: 0,
      recent: [],
      ready: Promise.any(confirmations).then(
        () => {
          entry.confirmed = true;
        },
        () => undefined,
      ),
    };
    this.#channels.set(channel, entry);
    return entry.ready;
  }

  /** True when a node has confirmed the subscription to `channel` and it is still kept. */
  isListening(channel: string): boolean {
    return this.#channels.get(channel)?.confirmed === true;
  }

  /**
   * Drops one reference to `channel`; after the last one it unsubscribes once the linger passes
   * (one timer for all channels, not one per call: a busy channel's users come and go constantly).
   */
  unsubscribe(channel: string): void {
    const entry = this.#channels.get(channel);
    if (entry === undefined) return;
    entry.refs -= 1;
    if (entry.refs > 0) return;
    entry.idleSince = performance.now();
    if (this.#lingerTimer === undefined && !this.#closed) this.#armLinger(this.#lingerMs);
  }

  #armLinger(delay: number): void {
    this.#lingerTimer = setTimeout(() => this.#sweepIdle(), delay);
    this.#lingerTimer.unref();
  }

  /** Unsubscribes channels idle for the linger; re-arms for the next one to come due. */
  #sweepIdle(): void {
    this.#lingerTimer = undefined;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    for (const [channel, entry] of this.#channels) {
      if (entry.refs > 0) continue;
      const due = entry.idleSince + this.#lingerMs;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      this.#channels.delete(channel);
      for (const subscriber of this.#subscribers ?? []) subscriber.unsubscribe(channel).catch(() => undefined);
    }
    // At most four sweeps per linger, however the idle times are spread (a channel may linger up
    // to a quarter longer).
    if (next !== Number.POSITIVE_INFINITY && !this.#closed) {
      this.#armLinger(Math.max(1, Math.ceil(next - now), Math.ceil(this.#lingerMs / 4)));
    }
  }

  /** Closes the subscriber connections this notifier created (never the caller's clients). */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    this.#channels.clear();
    const subscribers = this.#subscribers ?? [];
    this.#subscribers = [];
    for (const subscriber of subscribers) subscriber.close();
  }

  /** Passes a message on, unless it repeats a recent one on its channel (see the class comment). */
  #deliver(channel: string, message: string): void {
    const entry = this.#channels.get(channel);
    if (entry !== undefined && message !== "") {
      const { recent } = entry;
      if (recent.includes(message)) return;
      recent.push(message);
      if (recent.length > RECENT) recent.shift();
    }
    this.#onRelease(channel, message);
  }

  #ensureSubscribers(): SubscriberConnection[] {
    if (this.#subscribers !== undefined) return this.#subscribers;
    // Connection errors surface as lost wake-ups (covered by polling), never as crashes.
    const events = {
      onMessage: (channel: string, message: string) => this.#deliver(channel, message),
      onReconnect: () => this.#onResubscribed(),
    };
    this.#subscribers = this.#connections.map((connection) => connection.duplicateForPubSub(events));
    return this.#subscribers;
  }
}
