import { performance } from "node:perf_hooks";
import type { Lock } from "redlock";
import * as contract from "../backend.js";
import type { ReleaseOutcome } from "../locker.js";
import { ignore } from "./client/redis-connection.js";
import { listHeld, type RedisListing } from "./list-keys.js";
import { ownedToken, ownerOfToken, ownerTokenPrefix } from "./owner-token.js";
import { QuorumNodes } from "./quorum-nodes.js";
import { classify, type LoadedRedlock, redlockMissing, startRedlock } from "./redlock-adapter.js";
import { ADOPT, EXTEND_MANY, INSPECT, RELEASE, RESTORE_MANY } from "./scripts.js";
import { SplitVotes } from "./split-votes.js";
import { unavailable } from "./store-errors.js";
import { timeLeft } from "./stored-views.js";
import type { RedisClient } from "./types.js";
import { leaseHandle, ranOutOnArrival, validUntilOf } from "./validity.js";

/** Settings of {@link RedlockStore}. */
export interface RedlockStoreSettings {
  readonly driftFactor: number;
  readonly commandTimeout: number;
  /** The locker's key prefix (see {@link RedlockStore.resourceOf}). */
  readonly prefix: string;
  /** The locker's owner: carried in every token it writes (see owner-token.ts). */
  readonly owner: string;
  /** How the locker hears releases (see redis-backend.ts). */
  readonly watcher: contract.ReleaseWatcher;
}

/**
 * Locks on a majority of independent Redis nodes (Redlock). No grant queue (each node would
 * keep its own) and no fencing (no single counter sees every grant).
 *
 * redlock acquires (see redlock-adapter.ts); extension and release run our own scripts on every
 * node, because redlock's cannot tell a key that is gone from a key held by another token, and
 * that difference matters: a node that lost the key (restarted empty) while a majority still
 * holds it gets the key back (set-if-absent with our token), so the lock keeps its redundancy and
 * survives the next minority restart too.
 */
export class RedlockStore implements contract.Backend, contract.Naming, contract.HandOff, contract.Listing {
  /** redlock over this store's nodes, once the package is loaded (rejects when it is missing). */
  readonly #redlock: Promise<LoadedRedlock>;
  readonly #nodes: QuorumNodes;
  readonly #driftFactor: number;
  /** Keys whose latest attempts here split the vote. */
  readonly #splits = new SplitVotes();
  /**
   * No permits: counted on each node, they could exceed the limit when holders win different
   * majorities. No fencing: no one counter sees every grant.
   */
  readonly can: contract.Capabilities;
  readonly watcher: contract.ReleaseWatcher;
  readonly #prefix: string;
  /** What every token of this store starts with: its locker's owner (see owner-token.ts). */
  readonly #tokenPrefix: string;
  readonly #listing: RedisListing;
  /**
   * Handles adopt on a quorum of as many nodes with the same prefix: a one-node locker adopting a
   * quorum's lock on one of its nodes would hold it alone while the others could grant it again.
   */
  readonly scope: string;

  constructor(clients: readonly RedisClient[], settings: RedlockStoreSettings) {
    this.#driftFactor = settings.driftFactor;
    this.#prefix = settings.prefix;
    this.#tokenPrefix = ownerTokenPrefix(settings.owner);
    this.scope = `redis:quorum/${clients.length}:${settings.prefix}`;
    this.can = {
      naming: this,
      handOff: this,
      listing: this,
      fencing: {
        unsupported: `they need a single Redis node or Cluster; this locker has ${clients.length} independent nodes`,
      },
    };
    this.watcher = settings.watcher;
    const nodes = new QuorumNodes(clients, settings.commandTimeout);
    this.#nodes = nodes;
    this.#redlock = startRedlock(nodes, settings.driftFactor, () => ownedToken(this.#tokenPrefix, 1));
    const connections = nodes.runners.map((runner) => runner.connection);
    // A key held on a quorum is on at least one of the nodes any majority leaves out.
    this.#listing = {
      nodes: async () => (await Promise.all(connections.map((connection) => connection.scanNodes()))).flat(),
      prefix: settings.prefix,
      cluster: false,
      inspect: (resource: string) => this.inspect(resource),
      timeoutMs: settings.commandTimeout,
      tolerated: connections.length - nodes.quorum,
    };
  }

  resourceOf(key: string): string {
    return this.#prefix + key;
  }

  /**
   * SCAN steps on every node (a key held on a quorum is on at least one of them), then the quorum's
   * {@link inspect} of each lock key found.
   */
  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    return listHeld(this.#listing, prefix, limit);
  }

  /** Whether no token holds `resource` on a majority of the nodes (false when that is not known). */
  async #nobodyHolds(resource: string): Promise<boolean> {
    try {
      return (await this.inspect(resource)).holders.length === 0;
    } catch {
      return false;
    }
  }

  /**
   * One read-only script per node (the lock's token and PTTL). The holder is the token a majority
   * of the nodes hold, with the time until fewer than a majority would (the quorum-th longest
   * PTTL among them). No queue (waiting is 0 here: the core adds this locker's waiters) and no
   * fencing. Fewer than a majority answering is a StoreUnavailableError.
   */
  async inspect(resource: string): Promise<contract.StoredView> {
    const answers = await Promise.allSettled(this.#nodes.runners.map((runner) => runner.run(INSPECT, [resource], [])));
    const found = new Map<string, number[]>();
    const causes: unknown[] = [];
    for (const answer of answers) {
      if (answer.status === "rejected" || !Array.isArray(answer.value)) {
        causes.push(answer.status === "rejected" ? answer.reason : new Error("unexpected reply"));
        continue;
      }
      const [token, left] = answer.value as [unknown, unknown];
      if (typeof token !== "string" || token === "") continue;
      const lefts = found.get(token) ?? [];
      lefts.push(timeLeft(left));
      found.set(token, lefts);
    }
    const { quorum } = this.#nodes;
    if (this.#nodes.runners.length - causes.length < quorum) throw unavailable(resource, "inspect", causes, "quorum");
    const holders: contract.StoredHolder[] = [];
    for (const [token, lefts] of found) {
      if (lefts.length < quorum) continue;
      lefts.sort((a, b) => b - a);
      holders.push({ owner: ownerOfToken(token), weight: 1, expiresInMs: lefts[quorum - 1] as number });
    }
    return { holders, waiting: 0 };
  }

  /**
   * Swaps the handed-off token for a fresh one of this locker on every node (ADOPT, with a lease of
   * `duration`): adopted when a majority swapped it with validity left (expiry minus elapsed minus
   * drift, as for an acquisition). Otherwise the swap is undone wherever it may have happened (the
   * nodes that swapped or did not answer; sent with the script's body, behind the adoption on the
   * same connection, even while it is down), and the answer is `taken` when a node holds another
   * token, `expired` when the key is gone, a StoreUnavailableError when too few nodes answered.
   * Nodes that answered the key was gone get it back at the first extension (see extendMany).
   */
  async adopt({
    resource,
    token,
    duration,
  }: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const fresh = ownedToken(this.#tokenPrefix, 1);
    const start = performance.now();
    const answers = await Promise.allSettled(
      this.#nodes.runners.map((runner) => runner.run(ADOPT, [resource], [token, fresh, duration], true)),
    );
    const validUntil = validUntilOf(start, duration, this.#driftFactor);
    let swapped = 0;
    let gone = 0;
    let taken = 0;
    const causes: unknown[] = [];
    for (const answer of answers) {
      if (answer.status === "rejected") causes.push(answer.reason);
      else if (answer.value === 1) swapped += 1;
      else if (answer.value === -1) taken += 1;
      else gone += 1;
    }
    const { quorum } = this.#nodes;
    if (swapped >= quorum && performance.now() < validUntil)
      return new contract.LockHandle(fresh, resource, start, validUntil);
    await Promise.allSettled(
      this.#nodes.runners.map((runner, node) => {
        const answer = answers[node];
        if (answer?.status === "fulfilled" && answer.value !== 1) return undefined;
        return runner.evalWhenConnected(ADOPT.source, [resource], [fresh, token, duration]);
      }),
    );
    if (swapped >= quorum) return "expired";
    if (swapped + gone + taken < quorum) throw unavailable(resource, "adopt", causes, "quorum");
    return taken > 0 ? "taken" : "expired";
  }

  /** One attempt on every node; success needs a majority and validity left on arrival. */
  async acquire({ resource, duration }: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const start = performance.now();
    this.#nodes.leaseAsked(duration);
    const { redlock, module } = await this.#redlock.catch((cause: unknown) => {
      throw redlockMissing(resource, cause);
    });
    // Every node is asked whether it runs scripts before the first vote (once per node): a node
    // that refuses them would otherwise be outvoted in silence, and the quorum would live on one
    // node less than the user deployed.
    const checked = this.#nodes.scriptsChecked();
    if (checked !== undefined) await checked;
    let lock: Lock;
    try {
      lock = await redlock.acquire([resource], duration);
    } catch (error) {
      const attemptMs = performance.now() - start;
      const verdict = await classify(module, error);
      if (!verdict.held) throw unavailable(resource, "acquire", verdict.causes, "quorum");
      // Some nodes voted for this attempt, so others raced it for the key: the vote may have split,
      // every contender undoing its minority. Then nobody holds the key, no release will wake
      // anyone, and every contender would sleep its whole backoff: ask who holds it.
      if (verdict.wonSome && (await this.#nobodyHolds(resource))) {
        return { kind: "held", retryAfterMs: this.#splits.retryDelay(resource, attemptMs) };
      }
      this.#splits.ended(resource);
      return { kind: "held" };
    }
    this.#splits.ended(resource);
    const handle = leaseHandle(lock.value, resource, start, duration, this.#driftFactor);
    if (ranOutOnArrival(handle, this)) return { kind: "expired-on-arrival" };
    return { kind: "acquired", handle };
  }

  /**
   * Extends on every node where the token still matches, in one script call per node for the
   * whole batch. Per lock: `extended` when a majority extended it with validity left, `taken`
   * when a majority can no longer be ours (too few nodes extended it even if every node that did
   * not answer had), else a transient error. After a success, the lock is restored on the nodes
   * that answered that its key was gone.
   */
  async extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    const outcomes: contract.ExtendOutcome[] = handles.map(() => "expired");
    const now = performance.now();
    const live = handles.filter((handle) => now < handle.validUntil);
    if (live.length === 0) return outcomes;
    const keys = live.map((handle) => handle.resource);
    // The tokens as one argument, the answers one character per key (see EXTEND_MANY).
    const args = [duration, live.map((handle) => handle.token).join(" ")];
    const start = performance.now();
    const answers = await Promise.allSettled(this.#nodes.runners.map((runner) => runner.run(EXTEND_MANY, keys, args)));
    const validUntil = validUntilOf(start, duration, this.#driftFactor);
    const inTime = performance.now() < validUntil;
    const { quorum } = this.#nodes;
    // What each node answered ("" when it failed), and the failures, the same for every lock.
    const replies = answers.map((answer) =>
      answer.status === "fulfilled" && typeof answer.value === "string" ? answer.value : "",
    );
    const causes = answers.flatMap((answer) => (answer.status === "rejected" ? [answer.reason as unknown] : []));
    const unanswered = causes.length;
    const toRestore: contract.LockHandle[][] = this.#nodes.runners.map(() => []);
    let position = 0;
    handles.forEach((handle, index) => {
      if (handle !== live[position]) return;
      let extended = 0;
      for (const reply of replies) if (reply[position] === "1") extended += 1;
      if (extended >= quorum && inTime) {
        handle.renew(start, validUntil);
        outcomes[index] = "extended";
        replies.forEach((reply, node) => {
          if (reply[position] === "0") toRestore[node]?.push(handle);
        });
      } else if (extended >= quorum) {
        outcomes[index] = "expired";
      } else if (extended + unanswered < quorum) {
        outcomes[index] = "taken";
      } else {
        outcomes[index] = unavailable(handle.resource, "extend", causes, "quorum");
      }
      position += 1;
    });
    await this.#restore(toRestore, start + duration);
    return outcomes;
  }

  /** Puts each node's lost keys back with our token where they are still absent. */
  async #restore(perNode: readonly contract.LockHandle[][], expiresAt: number): Promise<void> {
    const ttl = Math.floor(expiresAt - performance.now());
    if (ttl < 1) return;
    await Promise.allSettled(
      perNode.map((lost, node) =>
        lost.length === 0
          ? undefined
          : this.#nodes.runners[node]?.run(
              RESTORE_MANY,
              lost.map((handle) => handle.resource),
              [ttl, ...lost.map((handle) => handle.token)],
            ),
      ),
    );
  }

  /**
   * Compare-and-delete on every node (publishing the release), and what it found (redlock's own
   * release cannot tell these apart, so this runs our script on each node itself). Answers as soon
   * as a majority has deleted it (`released`): a node that is down or slow is not waited for, its
   * command goes on (and a node whose grant went unanswered deletes it once back). Otherwise, once
   * every node has answered or failed: `unknown` when too few answered to form a majority, else
   * `taken` when a node has another token, else `expired` (the key was gone).
   */
  release(handle: contract.LockHandle, ordered = false): Promise<ReleaseOutcome> {
    const nodes = this.#nodes.runners.length;
    const { quorum } = this.#nodes;
    let deleted = 0;
    let gone = 0;
    let taken = 0;
    let settled = 0;
    return new Promise((resolve) => {
      const answered = (): void => {
        settled += 1;
        if (deleted >= quorum) resolve("released");
        else if (settled === nodes) {
          resolve(deleted + gone + taken < quorum ? "unknown" : taken > 0 ? "taken" : "expired");
        }
      };
      this.#nodes.runners.forEach((runner, node) => {
        // A node whose grant of this lock went unanswered (and is down now) deletes it once back.
        this.#nodes.followUnanswered(node, RELEASE.source, [handle.resource], [handle.token, 0]);
        let sent: Promise<unknown>;
        try {
          sent = runner.run(RELEASE, [handle.resource], [handle.token, 0], ordered);
        } catch {
          answered();
          return;
        }
        sent
          .then((reply) => {
            // A bare code, or { 1, granted id } (never on a quorum node: it has no queue).
            const code = Array.isArray(reply) ? reply[0] : reply;
            if (code === 1) deleted += 1;
            else if (code === -1) taken += 1;
            else gone += 1;
          }, ignore) // a node whose command failed counts as answered, having found nothing
          .then(answered);
      });
    });
  }
}
