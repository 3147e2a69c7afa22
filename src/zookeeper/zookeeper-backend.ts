import { performance } from "node:perf_hooks";
import * as contract from "../backend.js";
import { InvalidArgumentError } from "../errors.js";
import type { ReleaseOutcome } from "../locker.js";
import { about, czxidOf, SessionExpiredError, unavailable, ZooKeeperCalls } from "./calls.js";
import { keyOfNodeName, nodeNameOf, queueOf, standingOf } from "./layout.js";
import { NodeJanitor } from "./node-janitor.js";
import { NodeJoiner } from "./node-joiner.js";
import type { ResolvedZooKeeperLockerOptions } from "./options.js";
import { type OwnNode, QueuedNodes } from "./queued-nodes.js";
import { inspectKey, listKeys } from "./stored-views.js";
import {
  codeOf,
  ErrorCode,
  NODE_DELETED,
  type ZooKeeperClient,
  type ZooKeeperEvent,
  type ZooKeeperState,
} from "./types.js";

const HELD: contract.AttemptOutcome = { kind: "held" };
/** A lease is trusted for `length × (1 − drift) − 1` ms after the command that confirmed it was sent. */
const DRIFT_FACTOR = 0.01;

/**
 * The backend of the ZooKeeper lockers (see `ZooKeeperLocker` for the whole picture): Curator's
 * recipes on the node layout of `layout.ts`.
 *
 * - An attempt creates its ephemeral sequential node (first the key's node, unless this locker
 *   knows it is there: see `KeyNodes`) and reads the key's children, pipelined: one round trip. The node holds when the weights of the
 *   nodes ahead of it plus its own fit the limit (1 for a lock), so waiters are served in arrival
 *   order across processes. A miss that joins the queue keeps its node as its registration and
 *   watches only the nodes ahead that keep it out (see `standingOf`); one that does not join
 *   deletes it.
 * - A watch that fires is reported as a release of the key: the core's waiter reads where its
 *   node stands (a read, not a write).
 * - A lease lives as long as the session: extending it is one `exists` per node (sent together),
 *   which confirms both; a node gone is "taken"; the session's expiry loses every lease at once.
 * - Fencing tokens are the holder node's czxid.
 * - A release deletes the node; the key's node goes once the key was idle here for 2 s, or when the
 *   locker closes (a busy key's delete fails harmlessly), so nothing stays behind but the prefix
 *   node — except the key nodes of locks whose session expired (the next locker to leave the key
 *   deletes it).
 *
 * @param limit permits per key: 1 for a lock.
 */
export function zooKeeperBackend(
  client: ZooKeeperClient,
  options: ResolvedZooKeeperLockerOptions,
  limit: number,
): contract.BackendFactory {
  return (context) => new ZooKeeperBackend(client, options, context, limit);
}

class ZooKeeperBackend
  implements
    contract.Backend,
    contract.ReleaseWatcher,
    contract.Naming,
    contract.WaitQueue,
    contract.Fencing,
    contract.Listing
{
  readonly can: contract.Capabilities = {
    naming: this,
    permits: true,
    heldUntilReleased: true,
    queue: this,
    fencing: this,
    handOff: { unsupported: "a ZooKeeper lock is an ephemeral node of its holder's session" },
    listing: this,
  };
  readonly watcher: contract.ReleaseWatcher = this;
  readonly #calls: ZooKeeperCalls;
  readonly #client: ZooKeeperClient;
  readonly #prefix: string;
  readonly #events: contract.BackendEvents;
  readonly #limit: number;
  /** Held nodes, by token (their name). */
  readonly #held = new Map<string, OwnNode>();
  /** Queued waiters' nodes, by registration token (see `QueuedNodes`). */
  readonly #queued = new QueuedNodes();
  /** Deletes this locker's nodes (close waits for it). */
  readonly #janitor: NodeJanitor;
  /** Makes the attempts' nodes. */
  readonly #joiner: NodeJoiner;
  /** Set once the client's session expired: the client is done for (it does not open another). */
  #sessionEnded: Error | undefined;
  #disconnected = false;
  #closing = false;

  constructor(
    client: ZooKeeperClient,
    options: ResolvedZooKeeperLockerOptions,
    context: contract.BackendContext,
    limit: number,
  ) {
    this.#client = client;
    this.#calls = new ZooKeeperCalls(client, options.operationTimeout);
    this.#janitor = new NodeJanitor(this.#calls);
    this.#prefix = options.prefix;
    this.#events = context.events;
    this.#limit = limit;
    this.#joiner = new NodeJoiner({
      calls: this.#calls,
      janitor: this.#janitor,
      prefix: options.prefix,
      owner: Buffer.from(context.owner, "utf8"),
    });
    client.on("state", this.#onState);
  }

  resourceOf(key: string): string {
    return `${this.#prefix}/${nodeNameOf(key)}`;
  }

  /** The caller's key of a key node's path, if it is one of this locker's. */
  #keyOf(resource: string): string | undefined {
    return resource.startsWith(`${this.#prefix}/`) ? keyOfNodeName(resource.slice(this.#prefix.length + 1)) : undefined;
  }

  async acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const { resource, duration, queueing, weight } = request;
    if (this.#sessionEnded !== undefined) throw unavailable(resource, this.#sessionEnded);
    const session = this.#client.getSessionTimeout();
    if (duration > session) {
      throw new InvalidArgumentError(
        "expiry",
        `at most the ZooKeeper session timeout (${session} ms): ZooKeeper deletes the nodes of a session it has not heard from for that long`,
        duration,
      );
    }
    const token = queueing.grantedToken;
    const registered = token === undefined ? undefined : this.#queued.get(token);
    if (registered !== undefined && token !== undefined) {
      const sentAt = performance.now();
      const children = await about(resource, this.#calls.children(resource));
      const outcome = await this.#place(request, registered, token, children, sentAt, false);
      if (outcome !== undefined) return outcome;
      // Its node went (its session expired, or someone deleted it): a fresh attempt, at the back.
    }
    const { node, name, children, sentAt } = await this.#joiner.join(resource, weight);
    const outcome = await this.#place(request, node, name, children, sentAt, true);
    if (outcome === undefined) throw unavailable(resource, new Error(`its node ${node.path} vanished at once`));
    return outcome;
  }

  /**
   * Where `node` (named `name`) stands in `children`, read by a command sent at `sentAt`, and what
   * follows: it holds; or a miss — a try that does not join deletes its node, one that joins
   * watches the nodes keeping it out (read again if one is gone already); or undefined when the node
   * is gone. On a failure, a node the attempt made (`fresh`) or found holding goes.
   */
  async #place(
    request: contract.AttemptRequest,
    node: OwnNode,
    name: string,
    found: string[],
    sentAt: number,
    fresh: boolean,
  ): Promise<contract.AttemptOutcome | undefined> {
    const { resource, queueing, weight } = request;
    let [children, readAt] = [found, sentAt];
    try {
      for (;;) {
        const standing = standingOf(queueOf(children, this.#limit), name, this.#limit);
        if (standing === "gone" || standing === "holds") {
          this.#queued.unqueue(name);
          return standing === "gone" ? undefined : await this.#grant(request, node, name, readAt);
        }
        if (!queueing.joinOnMiss) {
          this.#janitor.removeLater(node.path, resource);
          return HELD;
        }
        const replaced = this.#queued.register(node, name, `${queueing.waiterId} ${resource}`);
        if (replaced !== undefined) this.#janitor.removeLater(replaced.path, replaced.resource);
        // A node ahead that is gone before its watch is set fires nothing: read again.
        const watching = standing.map((entry) => this.#calls.exists(`${resource}/${entry.name}`, this.#onEvent));
        if ((await Promise.all(watching)).every((stat) => stat !== null)) {
          return { kind: "held", registration: { token: name, weight, sentAt: readAt, serverMs: 0 } };
        }
        readAt = performance.now();
        children = await this.#calls.children(resource);
      }
    } catch (error) {
      if (fresh || this.#held.get(name) === node) {
        this.#held.delete(name);
        this.#queued.unqueue(name);
        this.#janitor.removeLater(node.path, resource);
      }
      throw unavailable(resource, error);
    }
  }

  /** The outcome of a grant to `node`, confirmed by an answer to a command sent at `sentAt`. */
  async #grant(
    request: contract.AttemptRequest,
    node: OwnNode,
    name: string,
    sentAt: number,
  ): Promise<contract.AttemptOutcome> {
    node.validUntil = boundOf(sentAt, Math.min(request.duration, this.#client.getSessionTimeout()));
    this.#held.set(name, node);
    const handle = new contract.LockHandle(name, node.resource, sentAt, node.validUntil);
    // A failure here: the attempt's clean-up deletes the node (see #place).
    const fencingToken = request.fencing ? await this.issueFencingToken(handle) : undefined;
    if (performance.now() >= node.validUntil || (request.fencing && fencingToken === undefined)) {
      this.#janitor.track(this.release(handle));
      return { kind: "expired-on-arrival" };
    }
    return fencingToken === undefined ? { kind: "acquired", handle } : { kind: "acquired", handle, fencingToken };
  }

  /** One `exists` per node, sent together: each answer confirms the session and the node. */
  async extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    const sentAt = performance.now();
    const validUntil = boundOf(sentAt, Math.min(duration, this.#client.getSessionTimeout()));
    const outcomes: contract.ExtendOutcome[] = [];
    const checks: Array<Promise<void>> = [];
    handles.forEach((handle, index) => {
      const node = this.#held.get(handle.token);
      outcomes.push(node === undefined ? "taken" : "expired");
      if (node === undefined || sentAt >= handle.validUntil) return;
      const checking = this.#calls.exists(node.path).then(
        (stat) => {
          if (stat === null) {
            // Deleted by hand: the key's node goes too, once idle.
            this.#held.delete(handle.token);
            this.#janitor.dropKeyNode(node.resource);
            outcomes[index] = "taken";
            return;
          }
          node.validUntil = Math.max(node.validUntil, validUntil);
          if (validUntil > handle.validUntil) handle.renew(sentAt, validUntil);
          outcomes[index] = "extended";
        },
        (error: unknown) => {
          // A transient failure (the session's expiry is reported as it happens: see #onState).
          outcomes[index] = unavailable(handle.resource, error);
        },
      );
      checks.push(checking);
    });
    await Promise.all(checks);
    return outcomes;
  }

  /** Deletes the held node (the key's node goes once idle: see `KeyNodes`). Never rejects. */
  async release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    const node = this.#held.get(handle.token);
    if (node === undefined) return "expired";
    this.#held.delete(handle.token);
    const removing = this.#calls.sendRemove(node.path);
    this.#janitor.dropKeyNode(node.resource);
    try {
      await this.#calls.bound(removing);
      return performance.now() >= handle.validUntil ? "expired" : "released";
    } catch (error) {
      const code = codeOf(error);
      if (code === ErrorCode.NO_NODE || code === ErrorCode.SESSION_EXPIRED) return "expired";
      this.#janitor.track(this.#janitor.removeSurely(node.path));
      return "unknown";
    }
  }

  async leaveQueue(_resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    const node = grantedToken === undefined ? undefined : this.#queued.unqueue(grantedToken);
    if (node !== undefined) await this.#janitor.remove(node.path, node.resource);
  }

  /** The holder node's czxid (read back), or undefined when the node is gone. */
  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const node = this.#held.get(handle.token);
    if (node === undefined) return undefined;
    const stat = await about(handle.resource, this.#calls.exists(node.path));
    return stat === null ? undefined : czxidOf(stat);
  }

  inspect(resource: string): Promise<contract.StoredView> {
    return inspectKey(this.#calls, resource, this.#limit);
  }

  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    return listKeys(this.#calls, this.#prefix, prefix, limit, this.#limit);
  }

  /** Nothing to subscribe to: a queued attempt watches the nodes ahead of its own itself. */
  watch(): Promise<void> {
    return Promise.resolve();
  }

  unwatch(): void {}

  /** Never: a waiter's attempt after subscribing both joins and watches. */
  isWatching(): boolean {
    return false;
  }

  /** A node this locker waited behind was deleted: its key may be free. */
  readonly #onEvent = (event: ZooKeeperEvent): void => {
    if (this.#closing || event.getType() !== NODE_DELETED) return;
    const path = event.getPath();
    const key = this.#keyOf(path.slice(0, path.lastIndexOf("/")));
    if (key !== undefined) this.#events.released(key);
  };

  /** The session expired: every node of it is gone. Reconnected: watches resume, but waiters look again. */
  readonly #onState = (state: ZooKeeperState): void => {
    if (state.name === "EXPIRED") {
      const tokens = new Set(this.#held.keys());
      this.#held.clear();
      this.#queued.clear();
      this.#sessionEnded = new SessionExpiredError();
      this.#events.lost(tokens, "expired", this.#sessionEnded);
    } else if (state.name === "DISCONNECTED") {
      this.#disconnected = true;
      discardPartialReply(this.#client);
    } else if (state.name === "SYNC_CONNECTED" && this.#disconnected) {
      this.#disconnected = false;
      this.#events.missed();
    }
  };

  /**
   * Stops listening; deletes queued waiters' nodes (their waits were rejected). Held nodes stay
   * under their holders until their leases run out, as a dead holder's would (the session lives
   * on with the caller's client), then go; a release before that still works.
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#client.removeListener("state", this.#onState);
    for (const node of this.#queued.values()) this.#janitor.removeLater(node.path, node.resource);
    this.#queued.clear();
    for (const [token, node] of this.#held) {
      const expire = (): void => {
        if (this.#held.get(token) !== node) return;
        this.#held.delete(token);
        void this.#janitor.remove(node.path, node.resource);
      };
      setTimeout(expire, Math.max(0, node.validUntil - performance.now())).unref();
    }
    await this.#janitor.drain();
  }
}

/**
 * Works around `node-zookeeper-client` 1.1.3, which keeps the bytes of a reply cut short by a
 * dropped connection and reads the next connection's answers after them: the client then never
 * connects again (every connect answer is misread) and its session expires. Called on its
 * `DISCONNECTED` state, after it gave up the old socket and before it opens the next.
 */
function discardPartialReply(client: ZooKeeperClient): void {
  const manager = (client as { connectionManager?: { pendingBuffer?: unknown } }).connectionManager;
  if (typeof manager === "object" && manager !== null && "pendingBuffer" in manager) manager.pendingBuffer = null;
}

/** The local deadline of a lease of `length` ms confirmed by a command sent at `sentAt`. */
function boundOf(sentAt: number, length: number): number {
  return sentAt + length * (1 - DRIFT_FACTOR) - 1;
}
