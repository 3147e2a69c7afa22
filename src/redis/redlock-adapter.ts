/**
 * The only file that loads redlock (an optional peer dependency, imported on first use: a locker
 * on one node, a file or memory locker never loads it): the {@link Backend} for a quorum of independent Redis nodes.
 *
 * Which way: redlock through its public API, with no call recognised by its script text. redlock
 * acquires (`acquire` with `retryCount: 0`: our own wait loop does the waiting), its `scripts`
 * option supplies the clean-up script, and the votes an `ExecutionError` carries tell "held by
 * someone else" apart from "Redis failed". Why that keeps our guarantees: the clients redlock
 * calls are ours — one small facade per node over a {@link ScriptRunner}, so every command is
 * bounded by the timeout and ioredis and node-redis clients both vote — and they treat every call
 * alike. Each goes out as EVAL with its body (from redlock's public `scripts` table, by hash), so
 * a flushed script cache can neither fail a call nor let the clean-up queued behind an attempt on
 * the same connection overtake it. And a call whose token (the first argument of every redlock
 * script) has an earlier call still unanswered on that node follows it: while the node is down it
 * is queued on the client, to run after the client re-sends the earlier call on reconnection.
 * Extension and release are our own scripts, because redlock's cannot tell a key that is gone
 * from one held by another token (see {@link RedlockStore}).
 */
import { performance } from "node:perf_hooks";
import type Redlock from "redlock";
import type { Lock } from "redlock";
import type {
  AdoptRequest,
  AttemptOutcome,
  AttemptRequest,
  Backend,
  Capabilities,
  ExtendOutcome,
  HandOff,
  ListedResource,
  Listing,
  Naming,
  ReleaseWatcher,
  StoredHolder,
  StoredView,
} from "../core/backend.js";
import { LockHandle } from "../core/backend.js";
import { StoreUnavailableError } from "../errors.js";
import type { ReleaseOutcome } from "../locker.js";
import { connectionOf } from "./client/connection-of.js";
import { ignore, type ScriptArgument } from "./client/redis-connection.js";
import { listHeld } from "./list-keys.js";
import { ownedToken, ownerOfToken, ownerTokenPrefix } from "./owner-token.js";
import { ScriptRunner } from "./script-runner.js";
import { ADOPT, EXTEND_MANY, INSPECT, REDLOCK_RELEASE_SCRIPT, RELEASE, RESTORE_MANY } from "./scripts.js";
import { unavailable } from "./store-errors.js";
import type { RedisClient } from "./types.js";

/** Settings of {@link RedlockStore}. */
export interface RedlockStoreSettings {
  readonly driftFactor: number;
  readonly commandTimeout: number;
  /** The locker's key prefix (see {@link RedlockStore.resourceOf}). */
  readonly prefix: string;
  /** The locker's owner: carried in every token it writes (see owner-token.ts). */
  readonly owner: string;
  /** How the locker hears releases (see redis-backend.ts). */
  readonly watcher: ReleaseWatcher;
}

/**
 * Locks on a majority of independent Redis nodes (Redlock). No grant queue (each node would
 * keep its own) and no fencing (no single counter sees every grant).
 *
 * redlock acquires; extension and release run our own scripts on every node, because redlock's
 * cannot tell a key that is gone from a key held by another token, and that difference matters:
 * a node that lost the key (restarted empty) while a majority still holds it gets the key back
 * (set-if-absent with our token), so the lock keeps its redundancy and survives the next minority
 * restart too.
 */
export class RedlockStore implements Backend, Naming, HandOff, Listing {
  /** redlock over this store's nodes, once the package is loaded (rejects when it is missing). */
  readonly #redlock: Promise<LoadedRedlock>;
  readonly #runners: readonly ScriptRunner[];
  readonly #clients: readonly RedisClient[];
  readonly #commandTimeout: number;
  readonly #driftFactor: number;
  /**
   * Per node: tokens of calls (attempts) sent there and not (yet) answered, with until when they
   * are remembered (monotonic ms; no earlier than their keys would expire). The client re-sends
   * such a command when it reconnects — to a node that restarted empty, where it then sets the
   * key — so its clean-up must not be refused while the connection is down (see
   * {@link #followUnanswered}).
   */
  readonly #unanswered: ReadonlyArray<Map<string, number>>;
  /** The longest lease asked for so far (ms): how long an unanswered call is remembered. */
  #longest = 0;
  /** Keys whose latest attempts here split the vote, with how many did in a row (see splitRetryDelay). */
  readonly #splits = new Map<string, number>();
  /**
   * No permits: counted on each node, they could exceed the limit when holders win different
   * majorities. No fencing: no one counter sees every grant.
   */
  readonly can: Capabilities;
  readonly watcher: ReleaseWatcher;
  readonly #prefix: string;
  /** What every token of this store starts with: its locker's owner (see owner-token.ts). */
  readonly #tokenPrefix: string;
  /**
   * Handles adopt on a quorum of as many nodes with the same prefix: a one-node locker adopting a
   * quorum's lock on one of its nodes would hold it alone while the others could grant it again.
   */
  readonly scope: string;

  /**
   * SCAN steps on every node (a key held on a quorum is on at least one of them), then the quorum's
   * {@link inspect} of each lock key found.
   */
  list(prefix: string, limit: number): Promise<ListedResource[]> {
    const connections = this.#clients.map((client) => connectionOf(client));
    const listing = {
      nodes: async () => (await Promise.all(connections.map((connection) => connection.scanNodes()))).flat(),
      prefix: this.#prefix,
      cluster: false,
      inspect: (resource: string) => this.inspect(resource),
      timeoutMs: this.#commandTimeout,
      tolerated: connections.length - (Math.floor(connections.length / 2) + 1),
    };
    return listHeld(listing, prefix, limit);
  }

  constructor(clients: readonly RedisClient[], settings: RedlockStoreSettings) {
    this.#clients = clients;
    this.#commandTimeout = settings.commandTimeout;
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
    this.#runners = clients.map(
      (client, index) => new ScriptRunner(connectionOf(client), `node #${index}`, settings.commandTimeout, true),
    );
    // redlock is typed against ioredis clients but only calls evalsha/eval on them, ioredis-style
    // (`hash, numkeys, [...keys, ...args]`); its EVALSHA goes out as EVAL with the body from its
    // own `scripts` table (see the top of this file).
    const sources = new Map<string, string>();
    const facades = this.#runners.map((runner, node) => ({
      evalsha: (hash: string, numkeys: number, ...rest: unknown[]) => {
        const [keys, args] = splitRedlockArguments(numkeys, rest);
        const source = sources.get(hash);
        return source === undefined ? runner.evalsha(hash, keys, args) : this.#send(node, source, keys, args);
      },
      eval: (source: string, numkeys: number, ...rest: unknown[]) =>
        this.#send(node, source, ...splitRedlockArguments(numkeys, rest)),
    }));
    this.#unanswered = this.#runners.map(() => new Map());
    this.#redlock = loadRedlock().then((module) => {
      const redlock = new module.default(
        facades as unknown as ConstructorParameters<typeof Redlock>[0],
        { retryCount: 0, driftFactor: settings.driftFactor },
        // redlock ignores script strings; only a function (a modifier of its own script) is used.
        { releaseScript: () => REDLOCK_RELEASE_SCRIPT },
      );
      for (const script of Object.values(redlock.scripts)) sources.set(script.hash, script.value);
      ownTokens(redlock, () => ownedToken(this.#tokenPrefix, 1));
      return { redlock, module };
    });
    // Seen by the first acquire; a locker that never acquires leaves no unhandled rejection.
    this.#redlock.catch(() => undefined);
  }

  resourceOf(key: string): string {
    return this.#prefix + key;
  }

  /**
   * A call of redlock's on `node`, whatever its script (see the top of this file): a follow-up of
   * an unanswered call with the same token (redlock's clean-up of a failed attempt) is ordered
   * behind it even while the connection is down; any other call is remembered until it is
   * answered. Either way redlock's vote is refused at once while the connection is down.
   */
  #send(node: number, source: string, keys: string[], args: ScriptArgument[]): Promise<unknown> {
    const runner = this.#runners[node] as ScriptRunner;
    if (this.#followUnanswered(node, source, keys, args)) return runner.eval(source, keys, args);
    const reply = runner.eval(source, keys, args);
    const [token] = args;
    if (typeof token !== "string" || !runner.connected) return reply; // refused at once: nothing was sent
    const unanswered = this.#unanswered[node] as Map<string, number>;
    const now = performance.now();
    // Entries past their expiry are of no use any more (the key expired on its own): drop them.
    // Every entry lives for the longest lease asked for so far, so they expire in insertion order.
    for (const [old, expiresAt] of unanswered) {
      if (expiresAt > now) break;
      unanswered.delete(old);
    }
    unanswered.set(token, now + this.#longest);
    reply.then(
      () => unanswered.delete(token),
      () => undefined,
    );
    return reply;
  }

  /**
   * When a call with the same token as `args`' first (a compare-and-delete's token) went
   * unanswered on `node`, forgets it and, if the connection is down now, queues `source` on the
   * client anyway, to run after the client re-sends that call on reconnection: a failing-fast
   * runner would refuse it, leaving a key nobody owns for a whole expiry (which also blocks
   * restoring the holder's key there). Returns whether there was such a call.
   */
  #followUnanswered(node: number, source: string, keys: string[], args: ScriptArgument[]): boolean {
    const runner = this.#runners[node] as ScriptRunner;
    const token = args[0];
    if (typeof token !== "string" || this.#unanswered[node]?.delete(token) !== true) return false;
    if (!runner.connected) runner.evalWhenConnected(source, keys, args).catch(() => undefined);
    return true;
  }

  /**
   * Resolves once every node that could be reached was found to run scripts (`undefined`, no
   * promise, when all were); rejects with the first refusal (an UnsupportedError naming the
   * command, see scripting.ts).
   */
  #scriptsChecked(): Promise<unknown> | undefined {
    let checks: Promise<void>[] | undefined;
    for (const runner of this.#runners) {
      const check = runner.scriptsChecked();
      if (check === undefined) continue;
      if (checks === undefined) checks = [];
      checks.push(check);
    }
    return checks === undefined ? undefined : Promise.all(checks);
  }

  /** Whether no token holds `resource` on a majority of the nodes (false when that is not known). */
  async #nobodyHolds(resource: string): Promise<boolean> {
    try {
      return (await this.inspect(resource)).holders.length === 0;
    } catch {
      return false;
    }
  }

  /** Counts another split vote of `resource` in a row here; returns how many that makes. */
  #splitAgain(resource: string): number {
    if (this.#splits.size >= SPLITS_KEPT && !this.#splits.has(resource)) this.#splits.clear();
    const inARow = (this.#splits.get(resource) ?? 0) + 1;
    this.#splits.set(resource, inARow);
    return inARow;
  }

  /** An attempt on `resource` ended other than in a split vote. */
  #splitsEnded(resource: string): void {
    if (this.#splits.size !== 0) this.#splits.delete(resource);
  }

  /**
   * One read-only script per node (the lock's token and PTTL). The holder is the token a majority
   * of the nodes hold, with the time until fewer than a majority would (the quorum-th longest
   * PTTL among them). No queue (waiting is 0 here: the core adds this locker's waiters) and no
   * fencing. Fewer than a majority answering is a StoreUnavailableError.
   */
  async inspect(resource: string): Promise<StoredView> {
    const answers = await Promise.allSettled(this.#runners.map((runner) => runner.run(INSPECT, [resource], [])));
    const found = new Map<string, number[]>();
    const causes: unknown[] = [];
    for (const answer of answers) {
      if (answer.status === "rejected" || !Array.isArray(answer.value)) {
        causes.push(answer.status === "rejected" ? answer.reason : new Error("unexpected reply"));
        continue;
      }
      const [token, left] = answer.value as [unknown, unknown];
      if (typeof token !== "string" || token === "") continue;
      const pttl = Number(left);
      const lefts = found.get(token) ?? [];
      lefts.push(pttl === -1 ? Number.POSITIVE_INFINITY : Math.max(0, pttl));
      found.set(token, lefts);
    }
    const quorum = Math.floor(this.#runners.length / 2) + 1;
    if (this.#runners.length - causes.length < quorum) throw unavailable(resource, "inspect", causes, "quorum");
    const holders: StoredHolder[] = [];
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
  async adopt({ resource, token, duration }: AdoptRequest): Promise<LockHandle | "taken" | "expired"> {
    const fresh = ownedToken(this.#tokenPrefix, 1);
    const start = performance.now();
    const answers = await Promise.allSettled(
      this.#runners.map((runner) => runner.run(ADOPT, [resource], [token, fresh, duration], true)),
    );
    const validUntil = start + duration - this.#drift(duration);
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
    const quorum = Math.floor(this.#runners.length / 2) + 1;
    if (swapped >= quorum && performance.now() < validUntil) return new LockHandle(fresh, resource, start, validUntil);
    await Promise.allSettled(
      this.#runners.map((runner, node) => {
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
  async acquire({ resource, duration }: AttemptRequest): Promise<AttemptOutcome> {
    const start = performance.now();
    if (duration > this.#longest) this.#longest = duration;
    const { redlock, module } = await this.#redlock.catch((cause: unknown) => {
      throw new StoreUnavailableError(
        resource,
        `A Redlock quorum (several Redis clients) needs the optional peer dependency redlock: npm install ${REDLOCK_PACKAGE}`,
        { cause },
      );
    });
    // Every node is asked whether it runs scripts before the first vote (once per node): a node
    // that refuses them would otherwise be outvoted in silence, and the quorum would live on one
    // node less than the user deployed.
    const checked = this.#scriptsChecked();
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
      // anyone, and every contender would sleep its backoff (50 ms by default): ask who holds it.
      if (verdict.wonSome && (await this.#nobodyHolds(resource))) {
        return { kind: "held", retryAfterMs: splitRetryDelay(attemptMs, this.#splitAgain(resource)) };
      }
      this.#splitsEnded(resource);
      return { kind: "held" };
    }
    this.#splitsEnded(resource);
    const handle = new LockHandle(lock.value, resource, start, start + duration - this.#drift(duration));
    if (performance.now() >= handle.validUntil) {
      void this.release(handle);
      return { kind: "expired-on-arrival" };
    }
    return { kind: "acquired", handle };
  }

  /**
   * Extends on every node where the token still matches, in one script call per node for the
   * whole batch. Per lock: `extended` when a majority extended it with validity left, `taken`
   * when a majority can no longer be ours (too few nodes extended it even if every node that did
   * not answer had), else a transient error. After a success, the lock is restored on the nodes
   * that answered that its key was gone.
   */
  async extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    const outcomes: ExtendOutcome[] = handles.map(() => "expired");
    const now = performance.now();
    const live = handles.filter((handle) => now < handle.validUntil);
    if (live.length === 0) return outcomes;
    const keys = live.map((handle) => handle.resource);
    // The tokens as one argument, the answers one character per key (see EXTEND_MANY).
    const args = [duration, live.map((handle) => handle.token).join(" ")];
    const start = performance.now();
    const answers = await Promise.allSettled(this.#runners.map((runner) => runner.run(EXTEND_MANY, keys, args)));
    const validUntil = start + duration - this.#drift(duration);
    const inTime = performance.now() < validUntil;
    const quorum = Math.floor(this.#runners.length / 2) + 1;
    // What each node answered ("" when it failed), and the failures, the same for every lock.
    const replies = answers.map((answer) =>
      answer.status === "fulfilled" && typeof answer.value === "string" ? answer.value : "",
    );
    const causes = answers.flatMap((answer) => (answer.status === "rejected" ? [answer.reason as unknown] : []));
    const unanswered = causes.length;
    const toRestore: LockHandle[][] = this.#runners.map(() => []);
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
  async #restore(perNode: readonly LockHandle[][], expiresAt: number): Promise<void> {
    const ttl = Math.floor(expiresAt - performance.now());
    if (ttl < 1) return;
    await Promise.allSettled(
      perNode.map((lost, node) =>
        lost.length === 0
          ? undefined
          : this.#runners[node]?.run(
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
  release(handle: LockHandle, ordered = false): Promise<ReleaseOutcome> {
    const nodes = this.#runners.length;
    const quorum = Math.floor(nodes / 2) + 1;
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
      this.#runners.forEach((runner, node) => {
        // A node whose grant of this lock went unanswered (and is down now) deletes it once back.
        this.#followUnanswered(node, RELEASE.source, [handle.resource], [handle.token, 0]);
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

  #drift(duration: number): number {
    // Redis expires keys with 1 ms precision; redlock adds the same 2 ms.
    return Math.round(this.#driftFactor * duration) + 2;
  }
}

/** The redlock package's exports. */
type RedlockModule = typeof import("redlock");

/** redlock over a store's nodes, with the package it came from (for its error classes). */
interface LoadedRedlock {
  readonly redlock: Redlock;
  readonly module: RedlockModule;
}

/** The package a quorum needs, as a user installs it. */
export const REDLOCK_PACKAGE = "redlock@5.0.0-beta.2";

/**
 * Imports redlock (once per store; the module cache makes later imports cheap). Where it is not
 * installed, every attempt of the quorum rejects with a {@link StoreUnavailableError} naming the
 * package, with the import's error as its cause.
 */
async function loadRedlock(): Promise<RedlockModule> {
  const loaded = await import("redlock");
  // Imported as CommonJS (the `globallock` command is a CommonJS bundle), the module's `default` is
  // redlock's `exports` object, as Node.js gives an ES module that imports a CommonJS one: its own
  // `default` is then the class.
  return typeof loaded.default === "function" ? loaded : (loaded.default as unknown as RedlockModule);
}

/**
 * The keys and arguments of a redlock script call: after `numkeys` it passes one array of keys then
 * arguments (ioredis would flatten it), or, were it to change, the same values spread.
 */
function splitRedlockArguments(numkeys: number, rest: readonly unknown[]): [string[], ScriptArgument[]] {
  const flat = rest.flat() as ScriptArgument[];
  return [flat.slice(0, numkeys).map(String), flat.slice(numkeys)];
}

/** What a failed quorum operation means, and the per-node errors behind it. */
interface Verdict {
  /** The key is held by another token on enough nodes that the answer is trustworthy. */
  readonly held: boolean;
  /** Some node voted for the attempt (which was undone: too few did). */
  readonly wonSome: boolean;
  /** Errors of the nodes that failed (not counting "held by another token" votes). */
  readonly causes: unknown[];
}

/**
 * Inspects the votes of a failed redlock operation. "Held" needs at least one node to say the key
 * belongs to another token and the nodes that answered at all to form a quorum; anything else is
 * a store failure. Every vote arrives within the command timeout, so waiting for all is bounded.
 */
async function classify(module: RedlockModule, error: unknown): Promise<Verdict> {
  const attempt = error instanceof module.ExecutionError ? error.attempts[0] : undefined;
  if (attempt === undefined) return { held: false, wonSome: false, causes: [error] };
  const stats = await attempt;
  let locked = 0;
  const causes: unknown[] = [];
  for (const vote of stats.votesAgainst.values()) {
    if (vote instanceof module.ResourceLockedError) locked += 1;
    else causes.push(vote);
  }
  const held = locked > 0 && stats.votesFor.size + locked >= stats.quorumSize;
  return { held, wonSome: stats.votesFor.size > 0, causes };
}

/** How many keys' split votes in a row a quorum keeps count of (past that it starts afresh). */
const SPLITS_KEPT = 256;

/**
 * How long a contender whose attempt split the vote waits before trying again (ms): 1 ms plus a
 * random time up to twice what the attempt took (its vote and the undo of its minority), doubled
 * for each split of the key in a row before it. At once, the contenders would split again, in
 * lock-step; spread over a couple of attempts' time, the first to try usually wins before the next
 * tries. The doubling bounds the tries where the split lasts: minorities left by contenders that
 * crashed stay until their lease runs out. (The wait loop never waits longer than its backoff.)
 */
function splitRetryDelay(attemptMs: number, inARow: number): number {
  return 1 + Math.random() * 2 * attemptMs * 2 ** Math.min(inARow - 1, 16);
}

/**
 * Makes `redlock` write tokens from `make` (tokens that carry the locker's owner) instead of its
 * own random values. redlock 5.0.0-beta.2 (pinned: the last v5 published) draws every lock's value
 * from its `_random()` method and takes no value from the caller; a redlock without that method
 * is refused here, so an upgrade that changed it fails loudly rather than dropping the owner.
 */
function ownTokens(redlock: Redlock, make: () => string): void {
  const target = redlock as unknown as { _random?: unknown };
  if (typeof target._random !== "function") {
    throw new Error("redlock has no _random() to draw lock values from: is it 5.0.0-beta.2?");
  }
  target._random = make;
}
