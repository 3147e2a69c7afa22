import { createHash } from "node:crypto";
import { DeadlineGroup } from "../internal/deadline-group.js";
import type { RedisClient } from "./types.js";

/** A Lua script with its SHA1, for EVALSHA with a fallback to EVAL. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

/** Every script defined so far: what a runner loads into a node before its first call. */
const defined: Script[] = [];

/** Prepares a Lua script for {@link ScriptRunner.run}. */
export function defineScript(source: string): Script {
  const script = { source, sha: createHash("sha1").update(source).digest("hex") };
  defined.push(script);
  return script;
}

/**
 * One Redis node (or Cluster) as the locker talks to it: every script call settles within the
 * timeout, so a frozen or unreachable node can never hang an operation. Also offers the
 * `evalsha`/`eval` pair that redlock calls, with the same timeout.
 *
 * Before its first call, and again after any `NOSCRIPT` (the node restarted, failed over or had
 * its cache flushed), a runner on a single node sends `SCRIPT LOAD` for every script, pipelined
 * ahead of that call: a cache miss costs one extra round trip per flush, not one per script, and
 * an extension on a slow link is not delayed by a miss it could have avoided. (On a Cluster the
 * scripts load on each master at their first `NOSCRIPT`.)
 */
export class ScriptRunner {
  readonly #client: RedisClient;
  readonly #label: string;
  readonly #timeoutMs: number;
  readonly #deadlines: DeadlineGroup;
  /** Whether the scripts were sent to the node since it last answered NOSCRIPT. */
  #loaded: boolean;

  /** Reject at once, instead of queueing, while the client's connection is down (see constructor). */
  readonly #failFast: boolean;

  /**
   * @param failFast reject a call at once while the client is reconnecting or closed, instead of
   *   letting the client queue it until it reconnects or the timeout passes. A Redlock quorum sets
   *   it: a node that is down then votes "failed" at once, so a vote (and a release) does not wait
   *   for it while a majority has answered.
   */
  constructor(client: RedisClient, label: string, timeoutMs: number, failFast = false) {
    this.#client = client;
    this.#label = label;
    this.#timeoutMs = timeoutMs;
    this.#failFast = failFast;
    // Checked every tenth of the timeout: a timeout fires at most 10% late.
    this.#deadlines = new DeadlineGroup(timeoutMs / 10);
    this.#loaded = client.isCluster;
  }

  /** The caller's client (for cluster detection and the like). */
  get client(): RedisClient {
    return this.#client;
  }

  /**
   * EVALSHA, falling back to EVAL when the script is not cached; bounded by the timeout.
   *
   * The fallback is a second command, sent when the NOSCRIPT reply arrives: commands sent on the
   * same connection in between run before it. So a command whose place in the connection's order
   * matters — one that undoes or follows up an earlier command without waiting for its reply —
   * passes `ordered`: it is sent as EVAL with the script's body, runs exactly where it was sent,
   * and cannot fail on a flushed script cache (after a restart, failover or SCRIPT FLUSH).
   */
  async run(
    script: Script,
    keys: readonly string[],
    args: readonly (string | number)[],
    ordered = false,
  ): Promise<unknown> {
    if (ordered) return await this.eval(script.source, keys.length, ...keys, ...args);
    if (!this.#loaded) this.#loadScripts();
    try {
      return await this.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
      if (!this.#client.isCluster) this.#loaded = false;
      return await this.eval(script.source, keys.length, ...keys, ...args);
    }
  }

  /** Sends SCRIPT LOAD for every script, without waiting (a failure just means a later miss). */
  #loadScripts(): void {
    this.#loaded = true;
    const client = this.#client as { script(...args: unknown[]): Promise<unknown> };
    for (const script of defined) {
      Promise.resolve(client.script("LOAD", script.source)).catch(() => undefined);
    }
  }

  /** `client.evalsha(...)` with the timeout (redlock calls this). */
  evalsha(...args: unknown[]): Promise<unknown> {
    return this.#call("evalsha", args);
  }

  /** `client.eval(...)` with the timeout (redlock calls this). */
  eval(...args: unknown[]): Promise<unknown> {
    return this.#call("eval", args);
  }

  #call(command: "evalsha" | "eval", args: unknown[]): Promise<unknown> {
    if (this.#failFast) {
      const status = (this.#client as { status?: string }).status;
      if (status === "reconnecting" || status === "close" || status === "end") {
        return Promise.reject(new Error(`Redis ${this.#label} is not connected (${status})`));
      }
    }
    const method = this.#client[command] as (...a: unknown[]) => Promise<unknown>;
    return this.#deadlines.run(
      Promise.resolve(method.apply(this.#client, args)),
      this.#timeoutMs,
      () => new Error(`Redis ${this.#label} did not answer within ${this.#timeoutMs} ms`),
    );
  }
}
