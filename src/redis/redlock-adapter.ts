/**
 * The only file that imports redlock: the {@link LockStore} for a quorum of independent Redis
 * nodes. It makes redlock do single attempts (our own wait loop does the waiting), bounds every
 * Redis command with a timeout, tells "held by someone else" apart from "Redis failed" by
 * inspecting the votes, checks the validity of every grant, and keeps redlock's types out of the
 * public declarations.
 */
import { performance } from "node:perf_hooks";
import Redlock, { ExecutionError, type Lock, ResourceLockedError } from "redlock";
import { UnsupportedError } from "../errors.js";
import type { ReleaseOutcome } from "../locker.js";
import { type AttemptOutcome, type ExtendOutcome, LockHandle, type LockStore } from "./lock-store.js";
import { ScriptRunner } from "./script-runner.js";
import { REDLOCK_RELEASE_SCRIPT, RELEASE } from "./scripts.js";
import { unavailable } from "./store-errors.js";
import type { RedisClient } from "./types.js";

/** Settings of {@link RedlockStore}. */
export interface RedlockStoreSettings {
  readonly driftFactor: number;
  readonly commandTimeout: number;
}

/**
 * Locks on a majority of independent Redis nodes (Redlock). No hand-off queue (each node would
 * keep its own) and no fencing (no single counter sees every grant).
 */
export class RedlockStore implements LockStore {
  readonly #redlock: Redlock;
  readonly #runners: readonly ScriptRunner[];
  readonly #driftFactor: number;
  readonly supportsFencing = false;

  constructor(clients: readonly RedisClient[], settings: RedlockStoreSettings) {
    this.#driftFactor = settings.driftFactor;
    this.#runners = clients.map((client, index) => new ScriptRunner(client, `node #${index}`, settings.commandTimeout));
    // redlock is typed against ioredis clients but only calls evalsha/eval on them; ours time out.
    this.#redlock = new Redlock(
      this.#runners as unknown as RedisClient[],
      { retryCount: 0, driftFactor: settings.driftFactor },
      // redlock ignores script strings; only a function (a modifier of its own script) is used.
      { releaseScript: () => REDLOCK_RELEASE_SCRIPT },
    );
  }

  hasQueue(): boolean {
    return false;
  }

  /** One attempt on every node; success needs a majority and validity left on arrival. */
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
    const handle = new LockHandle(lock.value, resource, start + duration - this.#drift(duration), lock);
    if (performance.now() >= handle.validUntil) {
      void this.release(handle);
      return { kind: "expired-on-arrival" };
    }
    return { kind: "acquired", handle };
  }

  /** Extends on a majority where the token still matches; redlock's new `Lock` replaces the old. */
  async extend(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const start = performance.now();
    try {
      handle.storeState = await this.#redlock.extend(handle.storeState as Lock, duration);
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
   * a majority deleted it, `taken` when a node has another token and the answers make a majority,
   * `expired` when the key was gone, `unknown` when too few nodes answered. redlock's own release
   * cannot tell these apart, so this runs our script on each node itself.
   */
  async release(handle: LockHandle): Promise<ReleaseOutcome> {
    const answers = await Promise.allSettled(
      this.#runners.map((runner) => runner.run(RELEASE, [handle.resource], [handle.token, 0])),
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

  async leaveQueue(): Promise<void> {}

  checkFencing(): void {
    throw new UnsupportedError(
      `Fencing tokens need a single Redis node or Cluster; this locker has ${this.#runners.length} independent nodes`,
    );
  }

  async issueFencingToken(): Promise<bigint | undefined> {
    this.checkFencing();
    return undefined;
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
