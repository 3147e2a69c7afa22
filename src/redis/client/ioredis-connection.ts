import type * as api from "./redis-connection.js";
import { ignore, NextReady, reportReconnections, scriptArguments } from "./redis-connection.js";

/** An ioredis command as {@link IoRedisLike.sendCommand} takes it (ioredis's `Command`). */
interface IoRedisCommand {
  /** The command's arguments, as its constructor would leave them: flat, strings. */
  args: unknown[];
  readonly promise: Promise<unknown>;
}

/** ioredis's `Command` class: the constructor of {@link IoRedisCommand}s. */
type IoRedisCommandClass = new (
  name: string,
  args: readonly unknown[],
  options: { replyEncoding: "utf8" },
) => IoRedisCommand;

/** The parts of an ioredis `Redis` or `Cluster` this adapter uses (both have them). */
export interface IoRedisLike {
  readonly status: string;
  readonly isCluster: boolean;
  /** The client's options, as ioredis keeps them (read once, for {@link directCommands}). */
  readonly options?: {
    readonly keyPrefix?: unknown;
    readonly enableAutoPipelining?: unknown;
    readonly showFriendlyErrorStack?: unknown;
  };
  /** Sends a command made with ioredis's `Command` class (see {@link directCommands}). */
  sendCommand?(command: IoRedisCommand): Promise<unknown>;
  /** A pipeline of the client's own ioredis (where {@link directCommands} finds `Command`). */
  pipeline?(): { sendCommand: unknown; ping(): unknown };
  /** Keys and arguments go as two arrays: ioredis flattens a command's arguments one level. */
  evalsha(sha: string, numkeys: number, keys: readonly string[], args: readonly api.ScriptArgument[]): Promise<unknown>;
  eval(source: string, numkeys: number, keys: readonly string[], args: readonly api.ScriptArgument[]): Promise<unknown>;
  set(key: string, value: string, px: "PX", ttlMs: number, nx: "NX"): Promise<unknown>;
  zrem(key: string, ...members: string[]): Promise<unknown>;
  script(subcommand: "LOAD", source: string): Promise<unknown>;
  /** Any command, by name (the transactions of a locker without scripts). */
  call(name: string, ...args: string[]): Promise<unknown>;
  /** A new client with the same options, `override` replacing some (a standalone `Redis`'s form). */
  duplicate(override?: object): IoRedisLike;
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  disconnect(): void;
  on(event: string, listener: (...args: never[]) => void): unknown;
  once(event: string, listener: (...args: never[]) => void): unknown;
  /** A Cluster's slots: per slot, the master's address ("host:port") first. */
  readonly slots?: ReadonlyArray<readonly string[] | undefined>;
  /** A Cluster's node clients (standalone `Redis` instances). */
  nodes?(role: "all" | "master"): IoRedisLike[];
}

/**
 * An ioredis `Redis` or `Cluster` as a {@link api.RedisConnection}: the calls the lockers always made
 * (`evalsha`/`eval` with `numkeys`, `script("LOAD")`, `duplicate()` for pub/sub), unchanged.
 * ioredis already answers in the shapes the stores expect.
 */
export class IoRedisConnection implements api.RedisConnection {
  readonly isCluster: boolean;
  readonly client: object;
  readonly #client: IoRedisLike;
  /** Makes commands whose arguments this adapter lays out itself (see {@link directCommands}). */
  readonly #Command: IoRedisCommandClass | undefined;

  readonly clusterNodes: api.ClusterNodes | undefined;

  constructor(client: IoRedisLike) {
    this.#client = client;
    this.client = client;
    this.isCluster = client.isCluster === true;
    this.#Command = directCommands(client);
    this.clusterNodes = this.isCluster ? new IoRedisClusterNodes(client) : undefined;
  }

  unavailableReason(): string | undefined {
    const status = this.#client.status;
    return status === "reconnecting" || status === "close" || status === "end" ? status : undefined;
  }

  // Without direct commands, the arrays are passed as they are, not spread into the call: ioredis
  // flattens them into the command's arguments anyway.
  evalsha(sha: string, keys: readonly string[], args: readonly api.ScriptArgument[]): Promise<unknown> {
    if (this.#Command === undefined) return this.#client.evalsha(sha, keys.length, keys, args);
    return this.#sendDirect("evalsha", scriptArguments(sha, keys, args));
  }

  eval(source: string, keys: readonly string[], args: readonly api.ScriptArgument[]): Promise<unknown> {
    if (this.#Command === undefined) return this.#client.eval(source, keys.length, keys, args);
    return this.#sendDirect("eval", scriptArguments(source, keys, args));
  }

  setIfAbsent(key: string, value: string, ttlMs: number): Promise<unknown> {
    if (this.#Command === undefined) return this.#client.set(key, value, "PX", ttlMs, "NX");
    return this.#sendDirect("set", [key, value, "PX", String(ttlMs), "NX"]);
  }

  removeMembers(key: string, member: string, other: string): Promise<unknown> {
    if (this.#Command === undefined) return this.#client.zrem(key, member, other);
    return this.#sendDirect("zrem", [key, member, other]);
  }

  /** Sends command `name` with `args` (flat, strings), built with {@link #Command} (set). */
  #sendDirect(name: string, args: string[]): Promise<unknown> {
    const command = new (this.#Command as IoRedisCommandClass)(name, NO_ARGUMENTS, UTF8);
    command.args = args;
    return (this.#client as Required<Pick<IoRedisLike, "sendCommand">>).sendCommand(command);
  }

  scriptLoad(source: string): Promise<unknown> {
    return this.#client.script("LOAD", source);
  }

  async scanNodes(): Promise<api.ScanStep[]> {
    if (this.clusterNodes !== undefined) await this.clusterNodes.ready();
    const nodes = this.isCluster ? (this.#client.nodes?.("master") ?? []) : [this.#client];
    return nodes.map(
      (node) => (cursor, match, count) => node.call("scan", cursor, "MATCH", match, "COUNT", String(count)),
    );
  }

  duplicateForPubSub(events: api.SubscriberEvents): api.SubscriberConnection {
    const subscriber = this.#client.duplicate();
    // Connection errors surface as lost wake-ups (covered by polling), never as crashes.
    subscriber.on("error", ignore);
    subscriber.on("message", (channel: string, message: string) => events.onMessage(channel, message));
    reportReconnections(subscriber, events);
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

  openTransactions(): api.TransactionConnection {
    if (this.isCluster) throw new TypeError("A Cluster's transactions go to each node's own connection");
    return new IoRedisTransactions(this.#client);
  }
}

/** An ioredis `Cluster`'s masters, for transactions (see api.ClusterNodes). */
class IoRedisClusterNodes implements api.ClusterNodes {
  readonly #cluster: IoRedisLike;
  readonly #ready = new NextReady();

  constructor(cluster: IoRedisLike) {
    this.#cluster = cluster;
  }

  ready(): Promise<void> | undefined {
    return this.#cluster.status === "ready" ? undefined : this.#ready.wait(this.#cluster);
  }

  masterOf(slot: number): string | undefined {
    return this.#cluster.slots?.[slot]?.[0];
  }

  openTransactions(address: string): api.TransactionConnection {
    const nodes = this.#cluster.nodes?.("all") ?? [];
    const node = nodes.find((candidate) => addressOf(candidate) === address);
    if (node === undefined) throw new Error(`the Cluster client knows no node at ${address}`);
    return new IoRedisTransactions(node);
  }
}

/** A node client's "host:port", as a Cluster's slots name it. */
function addressOf(node: IoRedisLike): string {
  const options = node.options as { host?: unknown; port?: unknown } | undefined;
  return `${String(options?.host)}:${String(options?.port)}`;
}

/**
 * A duplicate of an ioredis `Redis` (one node, a Sentinel's master, or a Cluster's master) for WATCH transactions:
 * no offline queue (a command sent while it is down fails at once, it never waits to go out on
 * the next connection), no re-sending of unanswered commands after a reconnection, no
 * auto-pipelining (commands go in call order, each as sent). A transaction whose connection closed
 * after its WATCH is not sent: {@link exec} answers `null`, as for a watched key that changed.
 */
class IoRedisTransactions implements api.TransactionConnection {
  readonly #client: IoRedisLike;
  /** Connections closed so far: a WATCH belongs to the connection it was sent on. */
  #closes = 0;
  /** {@link #closes} when the pending WATCH was sent; undefined when none is pending. */
  #watchedOn: number | undefined;
  /** The next `ready`, while the connection is not ready. */
  readonly #ready = new NextReady();
  /** Makes commands whose arguments are laid out here (see {@link directCommands}). */
  readonly #Command: IoRedisCommandClass | undefined;

  constructor(source: IoRedisLike) {
    this.#client = source.duplicate({
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      enableAutoPipelining: false,
      lazyConnect: false,
    });
    this.#Command = directCommands(this.#client);
    this.#client.on("error", ignore);
    this.#client.on("close", () => {
      this.#closes += 1;
    });
  }

  ready(): Promise<void> | undefined {
    return this.#client.status === "ready" ? undefined : this.#ready.wait(this.#client);
  }

  unavailableReason(): string | undefined {
    const status = this.#client.status;
    return status === "ready" ? undefined : status;
  }

  send(command: api.Command): Promise<unknown> {
    return this.#call(command[0] as string, command.slice(1));
  }

  /** Sends command `name` with `args`, built directly where the client allows (see {@link directCommands}). */
  #call(name: string, args: string[]): Promise<unknown> {
    if (this.#Command === undefined) return this.#client.call(name, ...args);
    const command = new this.#Command(name, NO_ARGUMENTS, UTF8);
    command.args = args;
    return (this.#client as Required<Pick<IoRedisLike, "sendCommand">>).sendCommand(command);
  }

  watchAndRead(keys: readonly string[], reads: readonly api.Command[]): Promise<unknown[]> {
    this.#watchedOn = this.#closes;
    const sent = [this.#call("watch", keys as string[])];
    for (const read of reads) sent.push(this.send(read));
    return Promise.all(sent).then((replies) => replies.slice(1));
  }

  exec(writes: readonly api.Command[]): Promise<unknown[] | null> {
    const watchedOn = this.#watchedOn;
    this.#watchedOn = undefined;
    if (watchedOn !== undefined && watchedOn !== this.#closes) return Promise.resolve(null);
    if (this.#client.status !== "ready") {
      return Promise.reject(new Error(`the connection is not ready (${this.#client.status})`));
    }
    // Sent in one synchronous run: nothing of this client can come between MULTI and EXEC. A
    // queued command's own error shows in EXEC's (EXECABORT).
    this.#call("multi", []).catch(ignore);
    for (const write of writes) this.send(write).catch(ignore);
    return this.#call("exec", []) as Promise<unknown[] | null>;
  }

  unwatch(): void {
    this.#watchedOn = undefined;
    if (this.#client.status === "ready") this.#call("unwatch", []).catch(ignore);
  }

  close(): void {
    this.#client.disconnect();
  }
}

/** What a direct command is made with: no arguments (they are set after), replies as strings. */
const NO_ARGUMENTS: readonly unknown[] = [];
const UTF8 = { replyEncoding: "utf8" } as const;

/**
 * ioredis's `Command` class when this adapter may lay out the arguments of its commands itself,
 * else undefined. ioredis's command methods (`client.evalsha(…)`) pass their arguments through
 * `Array.prototype.flat`, which V8 runs element by element on its generic path (what that pass
 * weighs is in docs/benchmarks.md). A command made with no arguments and given its flat list of
 * strings is the same command, built without that pass.
 *
 * Only for a standalone `Redis` whose commands ioredis would send unchanged: no `keyPrefix`
 * (ioredis prefixes the keys it finds; the lockers refuse such a client anyway), no
 * auto-pipelining (ioredis batches commands itself), no `showFriendlyErrorStack` (ioredis records
 * a stack per command). Anything else, a Cluster among them, goes through ioredis's methods.
 *
 * The class must be the client's own ioredis's (a command goes to that copy's `sendCommand`, and
 * the package that loaded this module may resolve another copy, or none). A client's class does
 * not name it (ioredis mixes EventEmitter's `constructor` into it), so it is read off a command
 * that the client's ioredis makes: a `PING` queued on a throwaway pipeline whose `sendCommand`
 * (an own property of that pipeline only) keeps the command instead. Nothing is sent. Should any
 * of that not hold (another client shape, another ioredis), the adapter uses ioredis's methods.
 */
function directCommands(client: IoRedisLike): IoRedisCommandClass | undefined {
  if (client.isCluster === true || typeof client.sendCommand !== "function" || typeof client.pipeline !== "function")
    return undefined;
  const options = client.options;
  if (options === undefined || options.keyPrefix || options.enableAutoPipelining || options.showFriendlyErrorStack)
    return undefined;
  try {
    const pipeline = client.pipeline();
    let made: unknown;
    pipeline.sendCommand = (command: unknown) => {
      made = command;
      return pipeline;
    };
    pipeline.ping();
    const command = made as Partial<IoRedisCommand> | undefined;
    if (command === undefined || !Array.isArray(command.args) || !(command.promise instanceof Promise))
      return undefined;
    // Never sent: its promise must not report a rejection nobody waits for.
    command.promise.catch(() => undefined);
    const Command = (command as { constructor?: unknown }).constructor;
    return typeof Command === "function" ? (Command as IoRedisCommandClass) : undefined;
  } catch {
    return undefined;
  }
}
