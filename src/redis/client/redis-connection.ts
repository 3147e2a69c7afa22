/**
 * What the Redis lockers need of a Redis client, whichever library made it: the one interface the
 * script runner and the release notifier talk to. Adapters: ioredis-connection.ts (ioredis `Redis`
 * and `Cluster`) and node-redis-connection.ts (node-redis v5 and later, `createClient()` and
 * `createCluster()`); connection-of.ts tells the clients apart.
 *
 * Script replies come back as ioredis gives them: integers as numbers, bulk and status strings as
 * strings, arrays as arrays, nil (and Lua `false`) as `null`.
 */

/** A script argument: ioredis sends numbers as they are; node-redis gets them as decimal strings. */
export type ScriptArgument = string | number;

/** One Redis node or Cluster, through the caller's client (which the locker never closes). */
export interface RedisConnection {
  /** True for a Cluster client: a script may only touch keys of one slot, and routes by its first key. */
  readonly isCluster: boolean;
  /** The caller's client itself: what several lockers on one client share (see `ScriptRunner`). */
  readonly client: object;
  /**
   * Why a command sent now could not be sent at once (reconnecting, closed), or `undefined` while
   * the connection is up. A quorum fails such a node at once instead of queueing behind it.
   */
  unavailableReason(): string | undefined;
  /** EVALSHA; rejects with a `NOSCRIPT …` error when the node does not have the script cached. */
  evalsha(sha: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown>;
  /** EVAL with the script's body. */
  eval(source: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown>;
  /**
   * `SET key value PX ttlMs NX`: resolves to `"OK"` when the key was set, `null` when it existed.
   * (The lean first attempt on a free key: no script, no queue keys.)
   */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<unknown>;
  /**
   * `ZREM key member other`: resolves to the number of the two members removed. (The lean release
   * of permits: a holder and its queue mark, see permit-scripts.ts.)
   */
  removeMembers(key: string, member: string, other: string): Promise<unknown>;
  /** SCRIPT LOAD (on a Cluster: one node). */
  scriptLoad(source: string): Promise<unknown>;
  /**
   * A new connection for pub/sub, made from the caller's client (same address, credentials and
   * TLS; for a Cluster, ioredis duplicates the cluster, node-redis one master's client: a PUBLISH
   * reaches every node) and owned by the caller of this method, who closes it. It connects on its own.
   */
  duplicateForPubSub(events: SubscriberEvents): SubscriberConnection;
  /**
   * A new connection of the caller's node (one node, or a Sentinel's master; not a Cluster), made
   * from the caller's client like {@link duplicateForPubSub}, for the WATCH transactions of a
   * locker without scripts (see scriptless-store.ts), owned and closed by the caller of this
   * method. It connects on its own.
   */
  openTransactions(): TransactionConnection;
  /** The Cluster's masters for such transactions; `undefined` for one node. */
  readonly clusterNodes: ClusterNodes | undefined;
  /**
   * A {@link ScanStep} for each node that holds keys: the one node, or each master of a Cluster
   * (as the client knows them; once it knows the Cluster's slots). For a listing of held locks.
   */
  scanNodes(): Promise<ScanStep[]>;
}

/**
 * One SCAN step on one node, `SCAN cursor MATCH match COUNT count`: resolves to the reply as the
 * client gives it (the next cursor and the names found, as strings).
 */
export type ScanStep = (cursor: string, match: string, count: number) => Promise<unknown>;

/**
 * A Cluster as the transactions of a locker without scripts reach it: WATCH, MULTI and EXEC must
 * go to the master of the keys' slot on one connection, which a Cluster client does not give (it
 * may send a keyless EXEC anywhere, or re-send a transaction elsewhere after a redirection, where
 * nothing is watched). So each master gets a connection of its own (see cluster-lanes.ts).
 */
export interface ClusterNodes {
  /** `undefined` once the client knows the Cluster's slots; else a promise that resolves when it does. */
  ready(): Promise<void> | undefined;
  /** The address ("host:port") of the master the client believes serves `slot`, if it knows one. */
  masterOf(slot: number): string | undefined;
  /** A new connection to the master at `address`, for transactions (throws when no such node is known). */
  openTransactions(address: string): TransactionConnection;
}

/** A command as the transaction connection sends it: its name, then its arguments, as strings. */
export type Command = readonly string[];

/**
 * A connection of the locker's own for optimistic transactions (WATCH, reads, MULTI, writes,
 * EXEC). WATCH is per connection, so only one transaction may be between its WATCH and its EXEC
 * at a time (see TransactionLane); commands outside transactions (a SET NX) may go in between.
 *
 * A client that reconnects between a WATCH and its EXEC must not send the EXEC on the new
 * connection, where nothing is watched and the writes would run unconditionally: {@link exec}
 * answers `null` (aborted) instead, and commands are neither queued while the connection is down
 * nor re-sent after a reconnection.
 */
export interface TransactionConnection {
  /** `undefined` while the connection is ready; else a promise that resolves once it is. */
  ready(): Promise<void> | undefined;
  /** Why a command sent now would fail at once (connecting, reconnecting, closed), or `undefined`. */
  unavailableReason(): string | undefined;
  /** One command, outside any transaction. */
  send(command: Command): Promise<unknown>;
  /** WATCH `keys`, then `reads`, pipelined (one round trip): the replies of the reads. */
  watchAndRead(keys: readonly string[], reads: readonly Command[]): Promise<unknown[]>;
  /**
   * MULTI, `writes`, EXEC, pipelined: the writes' replies, or `null` when the transaction was
   * aborted (a watched key changed, or the connection changed since the WATCH).
   */
  exec(writes: readonly Command[]): Promise<unknown[] | null>;
  /** UNWATCH, not waited for (a transaction that decided not to write). */
  unwatch(): void;
  /** Closes the connection at once (commands in flight fail). Never throws. */
  close(): void;
}

/** What a {@link SubscriberConnection} reports. */
export interface SubscriberEvents {
  /** A message on a subscribed channel. */
  onMessage(channel: string, message: string): void;
  /**
   * The connection came back after a disconnection and its subscriptions were renewed: messages
   * sent meanwhile were missed.
   */
  onReconnect(): void;
}

/** A pub/sub connection (see {@link RedisConnection.duplicateForPubSub}). */
export interface SubscriberConnection {
  /** Subscribes to `channel`; resolves once a node confirmed it. */
  subscribe(channel: string): Promise<void>;
  /** Unsubscribes from `channel`. */
  unsubscribe(channel: string): Promise<void>;
  /** Closes the connection at once (pending subscriptions fail). Never throws. */
  close(): void;
}

/** True for a Redis `NOSCRIPT` error reply (the script is not in the node's cache), from either client. */
export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/** Swallows an error (connection errors surface as failed commands or lost wake-ups instead). */
export function ignore(): undefined {
  return undefined;
}

/**
 * A script command's arguments, flat and as strings: `name` when given (the command's, for a
 * client that takes it among them), script or SHA, numkeys, keys, arguments.
 */
export function scriptArguments(
  script: string,
  keys: readonly string[],
  args: readonly ScriptArgument[],
  name?: string,
): string[] {
  const list = name === undefined ? [script, String(keys.length)] : [name, script, String(keys.length)];
  for (let index = 0; index < keys.length; index++) list.push(keys[index] as string);
  for (let index = 0; index < args.length; index++) {
    const arg = args[index] as ScriptArgument;
    list.push(typeof arg === "string" ? arg : String(arg));
  }
  return list;
}

/** A client that reports `ready` (ioredis and node-redis both do). */
interface ReadyEmitter {
  once(event: "ready", listener: () => void): unknown;
  on(event: "ready", listener: () => void): unknown;
}

/**
 * Reports every `ready` of the pub/sub connection `subscriber` after its first to `events` as a
 * reconnection: its subscriptions were renewed, and messages sent meanwhile were missed.
 */
export function reportReconnections(subscriber: ReadyEmitter, events: SubscriberEvents): void {
  let readyBefore = false;
  subscriber.on("ready", () => {
    if (readyBefore) events.onReconnect();
    readyBefore = true;
  });
}

/** The next `ready` of a connection: one listener and one promise for every caller until it fires. */
export class NextReady {
  #pending: Promise<void> | undefined;

  /** Resolves at `client`'s next `ready`. */
  wait(client: ReadyEmitter): Promise<void> {
    this.#pending ??= new Promise<void>((resolve) => {
      client.once("ready", () => {
        this.#pending = undefined;
        resolve();
      });
    });
    return this.#pending;
  }
}
