import type { LockHandle } from "../backend.js";
import { toUnknown } from "../internal/release-func.js";
import type { ReleaseOutcome } from "../locker.js";
import type { ScriptArgument } from "./client/redis-connection.js";
import { GRANT_PERMITS, HOLDER_MARK, RELEASE_CONTENDED_PERMITS } from "./permit-scripts.js";
import type { Script, ScriptRunner } from "./script-runner.js";

/** What {@link NodeReleases} needs of its store. */
export interface NodeReleaseSettings {
  readonly runner: ScriptRunner;
  /** The release script of the store's keys: a lock's, or counted locks' (RELEASE_PERMITS). */
  readonly script: Script;
  /** The TTL of a key a release grants to the next waiter, in ms. */
  readonly grantGrace: number;
  /** Permits per key, for counted locks; `undefined` for locks. */
  readonly limit: number | undefined;
}

/**
 * The releases of a store on one node or Cluster ({@link SingleNodeStore}): the release script,
 * or for permits still valid here the release without a script (see the marks in
 * permit-scripts.ts). Each records on the handle whom the release granted the key to
 * (`grantedTo`) and never rejects: a failure is `"unknown"`.
 */
export class NodeReleases {
  readonly #runner: ScriptRunner;
  readonly #script: Script;
  readonly #grantGrace: number;
  readonly #limit: number | undefined;
  /** GRANT_PERMITS's ARGV: grace, limit. */
  readonly #grantArguments: readonly ScriptArgument[];

  constructor(settings: NodeReleaseSettings) {
    this.#runner = settings.runner;
    this.#script = settings.script;
    this.#grantGrace = settings.grantGrace;
    this.#limit = settings.limit;
    this.#grantArguments = settings.limit === undefined ? [settings.grantGrace] : [settings.grantGrace, settings.limit];
  }

  /**
   * The release script on `keys` (a lock's, or permits that may have run out: see
   * RELEASE_PERMITS), sent at `now`; `ordered` as in {@link ScriptRunner.run}. A reaction rather
   * than an async frame: nothing stands between the reply and the caller.
   */
  byScript(handle: LockHandle, keys: readonly string[], ordered: boolean, now: number): Promise<ReleaseOutcome> {
    let sent: Promise<unknown>;
    try {
      sent = this.#runner.run(this.#script, keys, this.#argumentsOf(handle.token), ordered, now);
    } catch {
      return Promise.resolve("unknown");
    }
    return sent.then((reply) => releaseOutcomeOf(handle, reply), toUnknown);
  }

  /**
   * The release of permits still valid here (so not past their deadline in Redis). Uncontended:
   * one ZREM of the holder and its mark; removing both means someone may be queued, and
   * GRANT_PERMITS then grants the freed permits (a waiter that retries first may take them itself;
   * a newcomer cannot, the queue mark stops it). Contended (see {@link LockHandle.contended}): both
   * in one script (RELEASE_CONTENDED_PERMITS), so the next waiter's grant is published by the
   * release's own command.
   */
  async permits(handle: LockHandle, keys: readonly string[], ordered: boolean, now: number): Promise<ReleaseOutcome> {
    const contended = handle.contended;
    let removed: unknown;
    let granted: unknown = "";
    try {
      if (contended) {
        const args = this.#argumentsOf(handle.token);
        const reply = await this.#runner.run(RELEASE_CONTENDED_PERMITS, keys, args, ordered, now);
        [removed, granted] = Array.isArray(reply) ? reply : [];
      } else {
        removed = await this.#runner.removeMembers(handle.resource, handle.token, HOLDER_MARK + handle.token, now);
      }
    } catch {
      return "unknown";
    }
    if (removed !== 1 && removed !== 2) return "expired";
    if (removed === 2 && !contended) granted = await this.#grant(keys, ordered);
    handle.grantedTo = typeof granted === "string" ? granted : "";
    return "released";
  }

  /** GRANT_PERMITS after an uncontended release: the waiter granted, if any. */
  async #grant(keys: readonly string[], ordered: boolean): Promise<unknown> {
    try {
      return await this.#runner.run(GRANT_PERMITS, keys, this.#grantArguments, ordered);
    } catch {
      // The permits are free: queued waiters take them at their next attempt.
      return "";
    }
  }

  /** A release script's ARGV: token, grace, and for counted locks the limit. */
  #argumentsOf(token: string): ScriptArgument[] {
    return this.#limit === undefined ? [token, this.#grantGrace] : [token, this.#grantGrace, this.#limit];
  }
}

/**
 * What a release script's `reply` says (see RELEASE): a bare code when it granted the key to
 * nobody, else the code and the grantee, recorded on `handle`.
 */
function releaseOutcomeOf(handle: LockHandle, reply: unknown): ReleaseOutcome {
  let code = reply;
  let chosen: unknown = "";
  if (Array.isArray(reply)) [code, chosen] = reply;
  handle.grantedTo = typeof chosen === "string" ? chosen : undefined;
  return code === 1 ? "released" : code === -1 ? "taken" : "expired";
}
