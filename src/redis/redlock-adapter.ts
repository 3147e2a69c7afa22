/**
 * The only file that imports redlock. It makes redlock do single attempts (our own wait loop does
 * the waiting), bounds every Redis command with a timeout, tells "held by someone else" apart from
 * "Redis failed" by inspecting the votes, checks the validity of every grant, and keeps redlock's
 * types out of the public declarations.
 */
import { performance } from "node:perf_hooks";
import Redlock, { ExecutionError, type Lock, ResourceLockedError } from "redlock";
import { StoreUnavailableError } from "../errors.js";
import type { ReleaseOutcome } from "../locker.js";
import { ScriptRunner } from "./script-runner.js";
import { ISSUE_FENCING_TOKEN, REDLOCK_RELEASE_SCRIPT, RELEASE } from "./scripts.js";
import type { RedisClient } from "./types.js";

/** A lock held on a quorum of nodes: its token and local validity deadline (monotonic ms). */
export class LockHandle {
  /** Random ownership token (32 hex characters = 16 bytes), the same on every node. */
  readonly token: string;
  /** The full Redis key. */
  readonly resource: string;
  /** `performance.now()` past which the lock may have expired on a quorum of nodes. */
  validUntil: number;
  /** redlock's lock object; replaced by every extension, as redlock requires. */
  current: Lock;

  constructor(lock: Lock, resource: string, validUntil: number) {
    this.token = lock.value;
    this.resource = resource;
    this.validUntil = validUntil;
    this.current = lock;
  }
}

/** Result of one acquisition attempt. */
export type AttemptOutcome =
  | { readonly kind: "acquired"; readonly handle: LockHandle }
  /** A quorum of nodes answered and the key is held by another token. */
  | { readonly kind: "held" }
  /** A quorum granted it, but too late: its validity ran out before the reply arrived. */
  | { readonly kind: "expired-on-arrival" };

/**
 * Result of one extension attempt: `taken` when a quorum answered that the key is gone or has
 * another token, `expired` when the lock's validity had already run out locally (nothing is
 * sent). Transient failures throw {@link StoreUnavailableError}.
 */
export type ExtendOutcome = "extended" | "taken" | "expired";

/** Settings of {@link RedlockAdapter}. */
export interface RedlockAdapterSettings {
  readonly driftFactor: number;
  readonly commandTimeout: number;
}

export class RedlockAdapter {
  readonly #redlock: Redlock;
  readonly #runners: readonly ScriptRunner[];
  readonly #driftFactor: number;

  constructor(clients: readonly RedisClient[], settings: RedlockAdapterSettings) {
    this.#driftFactor = settings.driftFactor;
    const runners = clients.map(
      (client, index) =>
        new ScriptRunner(client, clients.length === 1 ? "node" : `node #${index}`, settings.commandTimeout),
    );
    this.#runners = runners;
    // redlock is typed against ioredis clients but only calls evalsha/eval on them.
    this.#redlock = new Redlock(
      runners as unknown as RedisClient[],
      {
        retryCount: 0,
        driftFactor: settings.driftFactor,
      },

      // redlock ignores script strings; only a function (a modifier of its own script) is used.
      { releaseScript: () => REDLOCK_RELEASE_SCRIPT },
    );
  }

  /** One attempt to take `resource` for `duration` ms on a quorum of nodes. */
  async acquire(resource: string, duration: number): Promise<AttemptOutcome> {
    const start = performance.now();
    let lock: Lock;
    try {
      lock = await this.#redlock.acquire([resource], duration);
    } catch (error) {
      const verdict = await classify(error);
      if (verdict.held) return { kind: "held" };
      throw unavailable(resource, "acquire", verdict.causes);
    }
    const handle = new LockHandle(lock, resource, start + duration - this.#drift(duration));
    if (performance.now() >= handle.validUntil) {
      void this.release(handle);
      return { kind: "expired-on-arrival" };
    }
    return { kind: "acquired", handle };
  }

  /**
   * Extends `handle` to `duration` ms from now on a quorum, only where its token still matches
   * (an expired key is never re-created). See {@link ExtendOutcome}.
   */
  async extend(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const start = performance.now();
    try {
      handle.current = await this.#redlock.extend(handle.current, duration);
    } catch (error) {
      if (error instanceof ExecutionError && error.attempts.length === 0) return "expired"; // nothing was sent
      const verdict = await classify(error);
      if (verdict.held) return "taken";
      throw unavailable(handle.resource, "extend", verdict.causes);
    }
    handle.validUntil = start + duration - this.#drift(duration);
    return "extended";
  }

  /**
   * Compare-and-delete on every node (publishing the release), and what it found: `released` when
   * a quorum deleted it, `taken` when a node has another token and the answers make a quorum,
   * `expired` when the key was gone, `unknown` when too few nodes answered. Never rejects.
   * redlock's own release cannot tell these apart, so this one runs our script itself.
   */
  async release(handle: LockHandle): Promise<ReleaseOutcome> {
    const answers = await Promise.allSettled(
      this.#runners.map((runner) => runner.run(RELEASE, [handle.resource], [handle.token])),
    );
    let deleted = 0;
    let gone = 0;
    let taken = 0;
    for (const answer of answers) {
      if (answer.status !== "fulfilled") continue;
      if (answer.value === 1) deleted += 1;
      else if (answer.value === -1) taken += 1;
      else gone += 1;
    }
    const quorum = Math.floor(this.#runners.length / 2) + 1;
    if (deleted >= quorum) return "released";
    if (deleted + gone + taken < quorum) return "unknown";
    return taken > 0 ? "taken" : "expired";
  }

  /**
   * Issues a fencing token for `handle` on a single client (node or Cluster), only while the lock
   * is held: resolves to the token, or `undefined` when the key no longer holds our token.
   * Throws {@link StoreUnavailableError} when Redis fails.
   */
  async issueFencingToken(handle: LockHandle, counterKey: string, counterTtl: number): Promise<bigint | undefined> {
    const runner = this.#runners[0];
    if (runner === undefined || this.#runners.length !== 1) throw new Error("fencing needs exactly one client");
    let reply: unknown;
    try {
      reply = await runner.run(ISSUE_FENCING_TOKEN, [handle.resource, counterKey], [handle.token, counterTtl]);
    } catch (error) {
      throw unavailable(handle.resource, "fencing token", [error]);
    }
    return typeof reply === "string" ? BigInt(reply) : undefined;
  }

  #drift(duration: number): number {
    // Redis expires keys with 1 ms precision; redlock adds the same 2 ms.
    return Math.round(this.#driftFactor * duration) + 2;
  }
}

/** What a failed quorum operation means, and the per-node errors behind it. */
interface Verdict {
  /** The key is held by another token on enough nodes that the answer is trustworthy. */
  readonly held: boolean;
  /** Errors of the nodes that failed (not counting "held by another token" votes). */
  readonly causes: unknown[];
}

/**
 * Inspects the votes of a failed redlock operation. "Held" needs at least one node to say the key
 * belongs to another token and the nodes that answered at all to form a quorum; anything else is
 * a store failure. Every vote arrives within the command timeout, so waiting for all is bounded.
 */
async function classify(error: unknown): Promise<Verdict> {
  const attempt = error instanceof ExecutionError ? error.attempts[0] : undefined;
  if (attempt === undefined) return { held: false, causes: [error] };
  const stats = await attempt;
  let locked = 0;
  const causes: unknown[] = [];
  for (const vote of stats.votesAgainst.values()) {
    if (vote instanceof ResourceLockedError) locked += 1;
    else causes.push(vote);
  }
  return { held: locked > 0 && stats.votesFor.size + locked >= stats.quorumSize, causes };
}

/** Builds the typed error for a quorum operation that failed for reasons other than contention. */
function unavailable(resource: string, operation: string, causes: unknown[]): StoreUnavailableError {
  const cause = causes.length === 1 ? causes[0] : new AggregateError(causes, `Redis ${operation} failed`);
  const detail = causes.map((c) => (c instanceof Error ? c.message : String(c))).join("; ");
  return new StoreUnavailableError(
    resource,
    `Redis ${operation} of "${resource}" did not reach a quorum: ${detail || "no node answered"}`,
    { cause },
  );
}
