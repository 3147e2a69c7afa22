import type * as api from "./redis-connection.js";
import { ignore, NextReady, reportReconnections, scriptArguments } from "./redis-connection.js";

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
  once(event: string, listener: (...args: never[]) => void): unknown;
}

/** A node-redis client (`createClient()`), as this adapter uses it. */
export interface NodeRedisClientLike extends NodeRedisCommon {
  sendCommand(args: string[], options?: object): Promise<unknown>;
  duplicate(): NodeRedisClientLike;
  /** WATCH (the client remembers its connection, so an EXEC after a reconnection fails). */
  watch(keys: string[]): Promise<unknown>;
  unwatch(): Promise<unknown>;
  /** A transaction: MULTI, the commands added, EXEC; `exec` rejects with a `WatchError` when aborted. */
  multi(): NodeRedisMulti;
  /** The same client with other reply types (v5 and later). */
  withTypeMapping?(typeMapping: object): NodeRedisClientLike;
}

/** A node-redis transaction being built (`client.multi()`). */
interface NodeRedisMulti {
  addCommand(args: string[]): NodeRedisMulti;
  exec(): Promise<unknown[]>;
}

/** A master of a node-redis cluster (`cluster.masters`): its client once the cluster connected to it. */
interface NodeRedisMaster {
  readonly client?: NodeRedisClientLike | undefined;
  /** "host:port". */
  readonly address?: string;
}

/** A node-redis cluster (`createCluster()`), as this adapter uses it. */
export interface NodeRedisClusterLike extends NodeRedisCommon {
  sendCommand(firstKey: string | undefined, isReadonly: boolean, args: string[], options?: object): Promise<unknown>;
  readonly masters: readonly NodeRedisMaster[];
  /** Per slot, its shard (the master first). */
  readonly slots?: ReadonlyArray<{ readonly master?: NodeRedisMaster } | undefined>;
  nodeClient(node: NodeRedisMaster): NodeRedisClientLike | Promise<NodeRedisClientLike>;
}

/**
 * Every command is sent with node-redis's default reply types, whatever type mapping the caller
 * set on the client (Buffers for strings, strings for numbers, …): integers come back as numbers,
 * bulk strings as strings, arrays as arrays and nil as `null`, as the stores expect.
 */
const COMMAND_OPTIONS = Object.freeze({ typeMapping: Object.freeze({}) });

/**
 * A node-redis client or cluster (v5 and later) as a {@link api.RedisConnection}. Scripts go through
 * `sendCommand` (a cluster routes them by their first key); replies keep node-redis's default
 * types. Pub/sub runs on a duplicate of the caller's client, connected here and closed by
 * {@link api.SubscriberConnection.close}.
 */
export class NodeRedisConnection implements api.RedisConnection {
  readonly isCluster: boolean;
  readonly client: object;
  readonly #client: NodeRedisClientLike | undefined;
  readonly #cluster: NodeRedisClusterLike | undefined;

  readonly clusterNodes: api.ClusterNodes | undefined;

  constructor(
    client: { kind: "client"; client: NodeRedisClientLike } | { kind: "cluster"; client: NodeRedisClusterLike },
  ) {
    this.isCluster = client.kind === "cluster";
    this.client = client.client;
    this.#client = client.kind === "client" ? client.client : undefined;
    this.#cluster = client.kind === "cluster" ? client.client : undefined;
    this.clusterNodes = this.#cluster === undefined ? undefined : new NodeRedisClusterNodes(this.#cluster);
  }

  unavailableReason(): string | undefined {
    return unavailableReasonOf(this.#client ?? (this.#cluster as NodeRedisClusterLike));
  }

  evalsha(sha: string, keys: readonly string[], args: readonly api.ScriptArgument[]): Promise<unknown> {
    return this.#send(keys[0], scriptArguments(sha, keys, args, "EVALSHA"));
  }

  eval(source: string, keys: readonly string[], args: readonly api.ScriptArgument[]): Promise<unknown> {
    return this.#send(keys[0], scriptArguments(source, keys, args, "EVAL"));
  }

  setIfAbsent(key: string, value: string, ttlMs: number): Promise<unknown> {
    return this.#send(key, ["SET", key, value, "PX", String(ttlMs), "NX"]);
  }

  removeMembers(key: string, member: string, other: string): Promise<unknown> {
    return this.#send(key, ["ZREM", key, member, other]);
  }

  scriptLoad(source: string): Promise<unknown> {
    return this.#send(undefined, ["SCRIPT", "LOAD", source]);
  }

  duplicateForPubSub(events: api.SubscriberEvents): api.SubscriberConnection {
    const client = this.#client;
    const cluster = this.#cluster as NodeRedisClusterLike;
    // Made asynchronously: a client that throws here costs wake-ups (polling covers them), never a lock.
    const duplicate = client !== undefined ? async () => client.duplicate() : () => duplicateOfAMaster(cluster);
    return new NodeRedisSubscriber(duplicate, events);
  }

  async scanNodes(): Promise<api.ScanStep[]> {
    const scan = (client: NodeRedisClientLike): api.ScanStep => {
      return (cursor, match, count) =>
        client.sendCommand(["SCAN", cursor, "MATCH", match, "COUNT", String(count)], COMMAND_OPTIONS);
    };
    if (this.#client !== undefined) return [scan(this.#client)];
    const cluster = this.#cluster as NodeRedisClusterLike;
    const clients = await Promise.all(
      cluster.masters.map(async (master) => master.client ?? (await cluster.nodeClient(master))),
    );
    return clients.map(scan);
  }

  openTransactions(): api.TransactionConnection {
    if (this.#client === undefined) throw new TypeError("A Cluster's transactions go to each node's own connection");
    const client = this.#client;
    return new NodeRedisTransactions(async () => client.duplicate());
  }

  #send(firstKey: string | undefined, command: string[]): Promise<unknown> {
    if (this.#client !== undefined) return this.#client.sendCommand(command, COMMAND_OPTIONS);
    return (this.#cluster as NodeRedisClusterLike).sendCommand(firstKey, false, command, COMMAND_OPTIONS);
  }
}

/** A node-redis cluster's masters, for transactions (see api.ClusterNodes); connected by the caller. */
class NodeRedisClusterNodes implements api.ClusterNodes {
  readonly #cluster: NodeRedisClusterLike;

  constructor(cluster: NodeRedisClusterLike) {
    this.#cluster = cluster;
  }

  ready(): undefined {
    return undefined;
  }

  masterOf(slot: number): string | undefined {
    return this.#cluster.slots?.[slot]?.master?.address;
  }

  openTransactions(address: string): api.TransactionConnection {
    const cluster = this.#cluster;
    const master = cluster.masters.find((candidate) => candidate.address === address);
    if (master === undefined) throw new Error(`the node-redis cluster knows no master at ${address}`);
    return new NodeRedisTransactions(async () => (master.client ?? (await cluster.nodeClient(master))).duplicate());
  }
}

/**
 * A new client to one master of `cluster` (a random one, so that many lockers spread over them),
 * duplicated from the cluster's own client of that node (same credentials, TLS and socket options).
 * A plain client is enough for pub/sub on a Cluster: a PUBLISH reaches every node's subscribers.
 * It takes one connection, where a duplicate of the whole cluster would first discover the
 * topology again.
 */
async function duplicateOfAMaster(cluster: NodeRedisClusterLike): Promise<NodeRedisClientLike> {
  const connected = cluster.masters.filter((master) => master.client !== undefined);
  const candidates = connected.length > 0 ? connected : cluster.masters;
  const master = candidates[Math.floor(Math.random() * candidates.length)];
  if (master === undefined) throw new Error("the node-redis cluster knows no master");
  return (master.client ?? (await cluster.nodeClient(master))).duplicate();
}

/**
 * A node-redis connection of the locker's own (a duplicate of the caller's client, or of one of
 * its cluster's node clients), made by `duplicate` and set up by `prepare`: connected at once
 * (calls wait for {@link connected}), its connection errors swallowed (they surface as failed
 * commands or lost wake-ups), and destroyed on close — once made, when closed while still
 * connecting.
 */
class OwnConnection {
  /** The connection, once connected. */
  readonly connected: Promise<NodeRedisClientLike>;
  #client: NodeRedisClientLike | undefined;
  #closed = false;

  constructor(duplicate: () => Promise<NodeRedisClientLike>, prepare: (connection: NodeRedisClientLike) => void) {
    this.connected = duplicate().then(async (connection) => {
      this.#client = connection;
      connection.on("error", ignore);
      prepare(connection);
      if (this.#closed) throw new Error("closed");
      await connection.connect();
      return connection;
    });
    // Closed while still connecting: destroy once the attempt settled, whatever it did.
    const destroyIfClosed = (): void => {
      if (this.#closed) destroyQuietly(this.#client);
    };
    this.connected.then(destroyIfClosed, destroyIfClosed);
  }

  /** The connection once made (connected or not yet). */
  get client(): NodeRedisClientLike | undefined {
    return this.#client;
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Destroys the connection (once made, if it is still being made). Never throws. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    destroyQuietly(this.#client);
  }
}

/**
 * A node-redis pub/sub connection of ours (see {@link OwnConnection}) that reports every `ready`
 * after the first as a reconnection (node-redis renews the subscriptions before it reports
 * `ready`).
 */
class NodeRedisSubscriber implements api.SubscriberConnection {
  readonly #connection: OwnConnection;
  readonly #listener: Listener;

  /** @param duplicate makes the connection (not yet connected). */
  constructor(duplicate: () => Promise<NodeRedisClientLike>, events: api.SubscriberEvents) {
    this.#listener = (message, channel) => events.onMessage(channel, message);
    this.#connection = new OwnConnection(duplicate, (connection) => reportReconnections(connection, events));
  }

  async subscribe(channel: string): Promise<void> {
    await (await this.#connection.connected).subscribe(channel, this.#listener);
  }

  async unsubscribe(channel: string): Promise<void> {
    if (this.#connection.closed) return;
    await (await this.#connection.connected).unsubscribe(channel, this.#listener);
  }

  close(): void {
    this.#connection.close();
  }
}

/** Whether `error` is node-redis's `WatchError`: a transaction aborted (a watched key changed, or a reconnection). */
function isWatchError(error: unknown): boolean {
  return error instanceof Error && error.constructor.name === "WatchError";
}

/**
 * A node-redis connection of ours (see {@link OwnConnection}) for WATCH transactions. node-redis
 * itself fails an EXEC whose WATCH was sent before a reconnection (a `WatchError`, answered as
 * `null` here), and writes a transaction's MULTI, commands and EXEC together.
 */
export class NodeRedisTransactions implements api.TransactionConnection {
  readonly #connection: OwnConnection;
  /** The client with node-redis's default reply types (see COMMAND_OPTIONS), for transactions. */
  #typed: NodeRedisClientLike | undefined;
  /** The next `ready`, while the connection reconnects. */
  readonly #ready = new NextReady();

  /** @param duplicate makes the connection (not yet connected). */
  constructor(duplicate: () => Promise<NodeRedisClientLike>) {
    this.#connection = new OwnConnection(duplicate, (connection) => {
      this.#typed = connection.withTypeMapping?.({}) ?? connection;
    });
  }

  ready(): Promise<void> | undefined {
    const client = this.#connection.client;
    if (client?.isReady === true) return undefined;
    if (client === undefined || !client.isOpen) return this.#connection.connected.then(() => undefined);
    // Reconnecting: the next `ready`, one listener for every caller.
    return this.#ready.wait(client);
  }

  unavailableReason(): string | undefined {
    const client = this.#connection.client;
    return client === undefined ? "connecting" : unavailableReasonOf(client);
  }

  send(command: api.Command): Promise<unknown> {
    return (this.#connection.client as NodeRedisClientLike).sendCommand(command as string[], COMMAND_OPTIONS);
  }

  watchAndRead(keys: readonly string[], reads: readonly api.Command[]): Promise<unknown[]> {
    const sent = [(this.#connection.client as NodeRedisClientLike).watch(keys as string[])];
    for (const read of reads) sent.push(this.send(read));
    return Promise.all(sent).then((replies) => replies.slice(1));
  }

  exec(writes: readonly api.Command[]): Promise<unknown[] | null> {
    const multi = (this.#typed as NodeRedisClientLike).multi();
    for (const write of writes) multi.addCommand(write as string[]);
    return multi.exec().catch((error: unknown) => {
      if (isWatchError(error)) return null;
      throw error;
    });
  }

  unwatch(): void {
    this.#connection.client?.unwatch().catch(ignore);
  }

  close(): void {
    this.#connection.close();
  }
}

/** Why a command sent on `client` now could not go at once ("closed", "reconnecting"), or undefined. */
function unavailableReasonOf(client: NodeRedisCommon): string | undefined {
  if (!client.isOpen) return "closed";
  return client.isReady === false ? "reconnecting" : undefined;
}

/** Closes a connection of the locker's own at once, if it is open; never throws or rejects. */
function destroyQuietly(client: NodeRedisClientLike | undefined): void {
  try {
    if (client?.isOpen) Promise.resolve(client.destroy()).catch(ignore);
  } catch {
    // already closed
  }
}
