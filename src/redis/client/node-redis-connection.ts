import {
  ignore,
  type RedisConnection,
  type ScriptArgument,
  type SubscriberConnection,
  type SubscriberEvents,
} from "./redis-connection.js";

/** A node-redis pub/sub message listener. */
type Listener = (message: string, channel: string) => void;

/** What node-redis clients and clusters (v5 and later) share, as far as this adapter uses it. */
interface NodeRedisCommon {
  /** True from `connect()` until the client is closed (also while it reconnects). */
  readonly isOpen: boolean;
  /** False while (re)connecting; a v5 cluster has no such property. */
  readonly isReady?: boolean;
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: Listener): Promise<unknown>;
  unsubscribe(channel: string, listener: Listener): Promise<unknown>;
  destroy(): unknown;
  on(event: string, listener: (...args: never[]) => void): unknown;
}

/** A node-redis client (`createClient()`), as this adapter uses it. */
export interface NodeRedisClientLike extends NodeRedisCommon {
  sendCommand(args: string[], options?: object): Promise<unknown>;
  duplicate(): NodeRedisClientLike;
}

/** A node-redis cluster (`createCluster()`), as this adapter uses it. */
export interface NodeRedisClusterLike extends NodeRedisCommon {
  sendCommand(firstKey: string | undefined, isReadonly: boolean, args: string[], options?: object): Promise<unknown>;
  duplicate(overrides?: { minimizeConnections?: boolean }): NodeRedisClusterLike;
  /** The node the cluster's (non-sharded) subscriptions live on, once there are any. */
  readonly pubSubNode?: { readonly client: { on(event: "ready", listener: () => void): unknown } } | undefined;
}

/**
 * Every command is sent with node-redis's default reply types, whatever type mapping the caller
 * set on the client (Buffers for strings, strings for numbers, …): integers come back as numbers,
 * bulk strings as strings, arrays as arrays and nil as `null`, as the stores expect.
 */
const COMMAND_OPTIONS = Object.freeze({ typeMapping: Object.freeze({}) });

/** `[name, shaOrSource, numkeys, ...keys, ...args]` with every argument a string (node-redis sends only strings). */
function scriptCommand(
  name: "EVALSHA" | "EVAL",
  script: string,
  keys: readonly string[],
  args: readonly ScriptArgument[],
): string[] {
  const command = [name, script, String(keys.length)];
  for (const key of keys) command.push(key);
  for (const arg of args) command.push(typeof arg === "string" ? arg : String(arg));
  return command;
}

/**
 * A node-redis client or cluster (v5 and later) as a {@link RedisConnection}. Scripts go through
 * `sendCommand` (a cluster routes them by their first key); replies keep node-redis's default
 * types. Pub/sub runs on a duplicate of the caller's client, connected here and closed by
 * {@link SubscriberConnection.close}.
 */
export class NodeRedisConnection implements RedisConnection {
  readonly library = "node-redis";
  readonly isCluster: boolean;
  readonly #client: NodeRedisClientLike | undefined;
  readonly #cluster: NodeRedisClusterLike | undefined;

  constructor(
    client: { kind: "client"; client: NodeRedisClientLike } | { kind: "cluster"; client: NodeRedisClusterLike },
  ) {
    this.isCluster = client.kind === "cluster";
    this.#client = client.kind === "client" ? client.client : undefined;
    this.#cluster = client.kind === "cluster" ? client.client : undefined;
  }

  unavailableReason(): string | undefined {
    const client: NodeRedisCommon = this.#client ?? (this.#cluster as NodeRedisClusterLike);
    if (!client.isOpen) return "closed";
    return client.isReady === false ? "reconnecting" : undefined;
  }

  evalsha(sha: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown> {
    return this.#send(keys[0], scriptCommand("EVALSHA", sha, keys, args));
  }

  eval(source: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown> {
    return this.#send(keys[0], scriptCommand("EVAL", source, keys, args));
  }

  scriptLoad(source: string): Promise<unknown> {
    return this.#send(undefined, ["SCRIPT", "LOAD", source]);
  }

  duplicateForPubSub(events: SubscriberEvents): SubscriberConnection {
    if (this.#client !== undefined) return new ClientSubscriber(this.#client.duplicate(), events);
    // Only the pub/sub node's connection is needed: no connection to every master up front.
    return new ClusterSubscriber(
      (this.#cluster as NodeRedisClusterLike).duplicate({ minimizeConnections: true }),
      events,
    );
  }

  #send(firstKey: string | undefined, command: string[]): Promise<unknown> {
    if (this.#client !== undefined) return this.#client.sendCommand(command, COMMAND_OPTIONS);
    return (this.#cluster as NodeRedisClusterLike).sendCommand(firstKey, false, command, COMMAND_OPTIONS);
  }
}

/**
 * A node-redis pub/sub connection of ours: connects at once (subscriptions wait for it), swallows
 * connection errors (they surface as lost wake-ups, covered by polling), and is destroyed on close.
 */
abstract class Subscriber<T extends NodeRedisCommon> implements SubscriberConnection {
  protected readonly client: T;
  readonly #connected: Promise<unknown>;
  readonly #listener: Listener;
  #closed = false;

  constructor(client: T, events: SubscriberEvents) {
    this.client = client;
    this.#listener = (message, channel) => events.onMessage(channel, message);
    client.on("error", ignore);
    // A subclass registers what reports a reconnection right after this: nothing is emitted
    // before the connection attempt's first callback.
    this.#connected = client.connect();
    // Closed while still connecting: destroy again once the attempt settled, whatever it did.
    this.#connected.then(
      () => this.#closed && this.#destroy(),
      () => this.#closed && this.#destroy(),
    );
  }

  /** Called once a subscription was confirmed. */
  protected subscribed(): void {}

  async subscribe(channel: string): Promise<void> {
    await this.#connected;
    await this.client.subscribe(channel, this.#listener);
    this.subscribed();
  }

  async unsubscribe(channel: string): Promise<void> {
    if (this.#closed) return;
    await this.#connected;
    await this.client.unsubscribe(channel, this.#listener);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#destroy();
  }

  #destroy(): void {
    try {
      Promise.resolve(this.client.destroy()).catch(ignore);
    } catch {
      // already closed
    }
  }
}

/** Pub/sub on a duplicate of a node-redis client: every `ready` after the first is a reconnection. */
class ClientSubscriber extends Subscriber<NodeRedisClientLike> {
  constructor(client: NodeRedisClientLike, events: SubscriberEvents) {
    super(client, events);
    let readyBefore = false;
    // node-redis renews the subscriptions before it reports `ready`.
    this.client.on("ready", () => {
      if (readyBefore) events.onReconnect();
      readyBefore = true;
    });
  }
}

/**
 * Pub/sub on a duplicate of a node-redis cluster. Its subscriptions live on one node's connection
 * (the cluster's `pubSubNode`, made on the first subscription): a `ready` of that connection after
 * it was first seen is a reconnection, and a new pub/sub connection (the node was replaced, its
 * subscriptions moved) is too. (A v5 cluster reports a node's `node-ready` only once per
 * connection, v6 on every reconnection, so the node's own `ready` is what is watched.)
 */
class ClusterSubscriber extends Subscriber<NodeRedisClusterLike> {
  readonly #watched = new WeakSet<object>();
  readonly #events: SubscriberEvents;
  #hadPubSubNode = false;

  constructor(cluster: NodeRedisClusterLike, events: SubscriberEvents) {
    super(cluster, events);
    this.#events = events;
    this.client.on("node-ready", () => {
      if (this.#watchPubSubNode()) events.onReconnect();
    });
  }

  protected override subscribed(): void {
    this.#watchPubSubNode();
  }

  /** Starts watching a pub/sub connection not watched yet; true when it replaced an earlier one. */
  #watchPubSubNode(): boolean {
    const connection = this.client.pubSubNode?.client;
    if (connection === undefined || this.#watched.has(connection)) return false;
    this.#watched.add(connection);
    // Added once it is ready: it fires on its reconnections only.
    connection.on("ready", () => this.#events.onReconnect());
    const replaced = this.#hadPubSubNode;
    this.#hadPubSubNode = true;
    return replaced;
  }
}
