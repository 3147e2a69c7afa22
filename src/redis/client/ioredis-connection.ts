import {
  ignore,
  type RedisConnection,
  type ScriptArgument,
  type SubscriberConnection,
  type SubscriberEvents,
} from "./redis-connection.js";

/** The parts of an ioredis `Redis` or `Cluster` this adapter uses (both have them). */
export interface IoRedisLike {
  readonly status: string;
  readonly isCluster: boolean;
  /** Keys and arguments go as two arrays: ioredis flattens a command's arguments one level. */
  evalsha(sha: string, numkeys: number, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown>;
  eval(source: string, numkeys: number, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown>;
  set(key: string, value: string, px: "PX", ttlMs: number, nx: "NX"): Promise<unknown>;
  zrem(key: string, ...members: string[]): Promise<unknown>;
  script(subcommand: "LOAD", source: string): Promise<unknown>;
  duplicate(): IoRedisLike;
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  disconnect(): void;
  on(event: string, listener: (...args: never[]) => void): unknown;
}

/**
 * An ioredis `Redis` or `Cluster` as a {@link RedisConnection}: the calls the lockers always made
 * (`evalsha`/`eval` with `numkeys`, `script("LOAD")`, `duplicate()` for pub/sub), unchanged.
 * ioredis already answers in the shapes the stores expect.
 */
export class IoRedisConnection implements RedisConnection {
  readonly isCluster: boolean;
  readonly #client: IoRedisLike;

  constructor(client: IoRedisLike) {
    this.#client = client;
    this.isCluster = client.isCluster === true;
  }

  unavailableReason(): string | undefined {
    const status = this.#client.status;
    return status === "reconnecting" || status === "close" || status === "end" ? status : undefined;
  }

  // The arrays are passed as they are, not spread into the call: ioredis flattens them into the
  // command's arguments anyway, and a spread would copy every argument once more.
  evalsha(sha: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown> {
    return this.#client.evalsha(sha, keys.length, keys, args);
  }

  eval(source: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown> {
    return this.#client.eval(source, keys.length, keys, args);
  }

  setIfAbsent(key: string, value: string, ttlMs: number): Promise<unknown> {
    return this.#client.set(key, value, "PX", ttlMs, "NX");
  }

  removeMembers(key: string, member: string, other: string): Promise<unknown> {
    return this.#client.zrem(key, member, other);
  }

  scriptLoad(source: string): Promise<unknown> {
    return this.#client.script("LOAD", source);
  }

  duplicateForPubSub(events: SubscriberEvents): SubscriberConnection {
    const subscriber = this.#client.duplicate();
    // Connection errors surface as lost wake-ups (covered by polling), never as crashes.
    subscriber.on("error", ignore);
    subscriber.on("message", (channel: string, message: string) => events.onMessage(channel, message));
    let connectedBefore = false;
    subscriber.on("ready", () => {
      if (connectedBefore) events.onReconnect();
      connectedBefore = true;
    });
    return {
      subscribe: async (channel) => {
        await subscriber.subscribe(channel);
      },
      unsubscribe: async (channel) => {
        await subscriber.unsubscribe(channel);
      },
      close: () => subscriber.disconnect(),
    };
  }
}
