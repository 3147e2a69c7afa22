/**
 * The only file that loads redlock (an optional peer dependency, imported on first use: a locker
 * on one node, a file or memory locker never loads it): how a quorum of independent Redis nodes
 * (`RedlockStore`, redlock-store.ts) drives it.
 *
 * Which way: redlock through its public API, with no call recognised by its script text. redlock
 * acquires (`acquire` with `retryCount: 0`: our own wait loop does the waiting), its `scripts`
 * option supplies the clean-up script, and the votes an `ExecutionError` carries tell "held by
 * someone else" apart from "Redis failed". Why that keeps our guarantees: the clients redlock
 * calls are ours — one small facade per node over a `ScriptRunner`, so every command is
 * bounded by the timeout and ioredis and node-redis clients both vote — and they treat every call
 * alike. Each goes out as EVAL with its body (from redlock's public `scripts` table, by hash), so
 * a flushed script cache can neither fail a call nor let the clean-up queued behind an attempt on
 * the same connection overtake it. And a call whose token (the first argument of every redlock
 * script) has an earlier call still unanswered on that node follows it: while the node is down it
 * is queued on the client, to run after the client re-sends the earlier call on reconnection (see
 * {@link QuorumNodes}). Extension and release are our own scripts, because redlock's cannot tell a
 * key that is gone from one held by another token (see `RedlockStore`).
 */
import type Redlock from "redlock";
import { StoreUnavailableError } from "../errors.js";
import type { ScriptArgument } from "./client/redis-connection.js";
import type { QuorumNodes } from "./quorum-nodes.js";
import { REDLOCK_RELEASE_SCRIPT } from "./scripts.js";

/** The redlock package's exports. */
type RedlockModule = typeof import("redlock");

/** redlock over a store's nodes, with the package it came from (for its error classes). */
export interface LoadedRedlock {
  readonly redlock: Redlock;
  readonly module: RedlockModule;
}

/** The package a quorum needs, as a user installs it. */
export const REDLOCK_PACKAGE = "redlock@5.0.0-beta.2";

/**
 * Loads redlock and makes it over `nodes`: acquiring with `retryCount: 0` and `driftFactor`,
 * writing tokens from `newToken` (tokens that carry the locker's owner). Where redlock is not
 * installed the promise rejects with the import's error (see {@link redlockMissing}); it never
 * reports an unhandled rejection (a locker that never acquires never awaits it).
 */
export function startRedlock(nodes: QuorumNodes, driftFactor: number, newToken: () => string): Promise<LoadedRedlock> {
  // redlock is typed against ioredis clients but only calls evalsha/eval on them, ioredis-style
  // (`hash, numkeys, [...keys, ...args]`); its EVALSHA goes out as EVAL with the body from its
  // own `scripts` table (see the top of this file).
  const sources = new Map<string, string>();
  const facades = nodes.runners.map((runner, node) => ({
    evalsha: (hash: string, numkeys: number, ...rest: unknown[]) => {
      const [keys, args] = splitRedlockArguments(numkeys, rest);
      const source = sources.get(hash);
      return source === undefined ? runner.evalsha(hash, keys, args) : nodes.send(node, source, keys, args);
    },
    eval: (source: string, numkeys: number, ...rest: unknown[]) =>
      nodes.send(node, source, ...splitRedlockArguments(numkeys, rest)),
  }));
  const started = loadRedlock().then((module) => {
    const redlock = new module.default(
      facades as unknown as ConstructorParameters<typeof Redlock>[0],
      { retryCount: 0, driftFactor },
      // redlock ignores script strings; only a function (a modifier of its own script) is used.
      { releaseScript: () => REDLOCK_RELEASE_SCRIPT },
    );
    for (const script of Object.values(redlock.scripts)) sources.set(script.hash, script.value);
    ownTokens(redlock, newToken);
    return { redlock, module };
  });
  // Seen by the first acquire; a locker that never acquires leaves no unhandled rejection.
  started.catch(() => undefined);
  return started;
}

/** The error of an attempt on `resource` without redlock installed (`cause`: the import's error). */
export function redlockMissing(resource: string, cause: unknown): StoreUnavailableError {
  return new StoreUnavailableError(
    resource,
    `A Redlock quorum (several Redis clients) needs the optional peer dependency redlock: npm install ${REDLOCK_PACKAGE}`,
    { cause },
  );
}

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
export interface Verdict {
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
export async function classify(module: RedlockModule, error: unknown): Promise<Verdict> {
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
