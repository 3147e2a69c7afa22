import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import { UnsupportedError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { isNoScriptError, type RedisConnection, type ScriptArgument } from "./client/redis-connection.js";
import { CHECK_SCRIPT, isScriptRefusal, scriptingRefused } from "./scripting.js";

/** A Lua script with its SHA1, for EVALSHA with a fallback to EVAL. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

/** A command that waits for the scripting check (see {@link ScriptRunner}): sent, or failed, when it ends. */
interface Gated {
  go(): void;
  fail(error: unknown): void;
}

/** See {@link ScriptRunner}'s `#scripting`. */
interface ScriptingGate {
  allowed: boolean;
  gated: Gated[] | undefined;
}

/** The scripting gate of each caller's client. */
const gates = new WeakMap<object, ScriptingGate>();

/** The scripting gate of `client` (made on first use). */
function gateOf(client: object): ScriptingGate {
  let gate = gates.get(client);
  if (gate === undefined) {
    gate = { allowed: false, gated: undefined };
    gates.set(client, gate);
  }
  return gate;
}

/** The check's script and its SHA1 (not loaded with the others: only the check runs it). */
const CHECK = { source: CHECK_SCRIPT, sha: createHash("sha1").update(CHECK_SCRIPT).digest("hex") };

/** Every script defined so far: what a runner loads into a node before its first call. */
const defined: Script[] = [];

/** Prepares a Lua script for {@link ScriptRunner.run}. */
export function defineScript(source: string): Script {
  const script = { source, sha: createHash("sha1").update(source).digest("hex") };
  defined.push(script);
  return script;
}

/**
 * One Redis node (or Cluster) as the locker talks to it, through the {@link RedisConnection} of the
 * caller's client (ioredis or node-redis): every script call settles within the timeout, so a
 * frozen or unreachable node can never hang an operation. Also offers the `evalsha`/`eval` pair
 * that redlock calls, with the same timeout.
 *
 * Before its first call, and again after any `NOSCRIPT` (the node restarted, failed over or had
 * its cache flushed), a runner on a single node sends `SCRIPT LOAD` for every script, pipelined
 * ahead of that call: a cache miss costs one extra round trip per flush, not one per script, and
 * an extension on a slow link is not delayed by a miss it could have avoided. (On a Cluster the
 * scripts load on each master at their first `NOSCRIPT`.)
 *
 * A node that refuses scripts (an ACL user without `@scripting`, EVAL or EVALSHA renamed away)
 * must be found before the first lock, not after: the lean attempt is a plain `SET NX`, which
 * such a node accepts, and its release (a script) would then fail, leaving the key for a whole
 * lease. So the runner's first command waits for one check — `SCRIPT LOAD`, `EVALSHA` and `EVAL`
 * of a trivial script, pipelined (one round trip; `NOSCRIPT` counts as allowed) — and every
 * command sent meanwhile waits with it, in call order. A refusal rejects them all with an
 * {@link UnsupportedError} naming the command (see scripting.ts), and is not remembered: the next
 * command checks again, so a node whose ACL was fixed works without a restart, and a refused
 * attempt costs the round trip it fails with anyway. A check that fails otherwise (the node cannot
 * be reached) fails those commands with its error, and is not remembered either. A script call
 * that meets a refusal later (the ACL changed) rejects with the same UnsupportedError and makes
 * the next command check again.
 */
export class ScriptRunner {
  readonly #connection: RedisConnection;
  readonly #label: string;
  readonly #timeoutMs: number;
  readonly #deadlines: DeadlineGroup;
  /** Makes the error of a call that timed out (one function for every call). */
  readonly #timeoutError = (): Error => new Error(`Redis ${this.#label} did not answer within ${this.#timeoutMs} ms`);
  /** Whether the scripts were sent to the node since it last answered NOSCRIPT. */
  #loaded: boolean;

  /** Reject at once, instead of queueing, while the client's connection is down (see constructor). */
  readonly #failFast: boolean;
  /**
   * What every runner on this runner's client shares about scripting: whether the node was found
   * to run scripts, and the commands waiting for the check in flight, in call order across the
   * lockers. Shared, so that lockers on one client check once and their waiting commands go out
   * interleaved as they were called: released runner by runner, one runner's commands would wait
   * behind all the others' answers, and its own timeout would count that wait as the node's silence.
   */
  readonly #scripting: ScriptingGate;
  /** What a refused EVAL becomes (one function for every call). */
  readonly #evalRefused = (error: unknown): never => {
    throw this.#refusal(error, "EVAL");
  };
  /** What a refused EVALSHA becomes (one function for every call). */
  readonly #evalshaRefused = (error: unknown): never => {
    throw this.#refusal(error, "EVALSHA");
  };

  /**
   * @param failFast reject a call at once while the client is reconnecting or closed, instead of
   *   letting the client queue it until it reconnects or the timeout passes. A Redlock quorum sets
   *   it: a node that is down then votes "failed" at once, so a vote (and a release) does not wait
   *   for it while a majority has answered.
   */
  constructor(connection: RedisConnection, label: string, timeoutMs: number, failFast = false) {
    this.#connection = connection;
    this.#scripting = gateOf(connection.client);
    this.#label = label;
    this.#timeoutMs = timeoutMs;
    this.#failFast = failFast;
    // One node answers in order; a Cluster's nodes each answer for themselves.
    this.#deadlines = new DeadlineGroup(timeoutMs, { inOrder: !connection.isCluster });
    this.#loaded = connection.isCluster;
  }

  /** False while the client's connection is down (reconnecting or closed). */
  get connected(): boolean {
    return this.#connection.unavailableReason() === undefined;
  }

  /** The connection this runner sends on (for cluster detection and the like). */
  get connection(): RedisConnection {
    return this.#connection;
  }

  /**
   * EVALSHA, falling back to EVAL when the script is not cached; bounded by the timeout.
   *
   * The fallback is a second command, sent when the NOSCRIPT reply arrives: commands sent on the
   * same connection in between run before it. So a command whose place in the connection's order
   * matters — one that undoes or follows up an earlier command without waiting for its reply —
   * passes `ordered`: it is sent as EVAL with the script's body, runs exactly where it was sent,
   * and cannot fail on a flushed script cache (after a restart, failover or SCRIPT FLUSH).
   *
   * `now`: `performance.now()` as the caller read it just before the call (its timeout starts
   * there; a clock read saved), else read here. The fallback runs in the timeout's own rejection
   * reaction (see `DeadlineGroup.run`), so a call that is answered goes through no step of it.
   */
  run(
    script: Script,
    keys: readonly string[],
    args: readonly ScriptArgument[],
    ordered = false,
    now?: number,
  ): Promise<unknown> {
    if (ordered) return this.eval(script.source, keys, args, now);
    if (!this.#loaded) this.#loadScripts();
    return this.#send(
      this.#failFast,
      () => this.#connection.evalsha(script.sha, keys, args),
      now,
      (error) => this.#evalAfterMiss(error, script, keys, args),
    );
  }

  /** {@link run}'s fallback: EVAL with the body after a NOSCRIPT; any other error is passed on. */
  #evalAfterMiss(
    error: unknown,
    script: Script,
    keys: readonly string[],
    args: readonly ScriptArgument[],
  ): Promise<unknown> {
    if (!isNoScriptError(error)) throw this.#refusal(error, "EVALSHA");
    if (!this.#connection.isCluster) this.#loaded = false;
    return this.eval(script.source, keys, args);
  }

  /** Sends SCRIPT LOAD for every script, without waiting (a failure just means a later miss). */
  #loadScripts(): void {
    this.#loaded = true;
    for (const script of defined) {
      try {
        this.#connection.scriptLoad(script.source).catch(() => undefined);
      } catch {
        // the call that follows fails the same way, and reports it
      }
    }
  }

  /**
   * EVAL with the script's body and the timeout, sent even while the connection is down (the
   * client queues it until it reconnects), where a failing-fast runner would refuse it: for a
   * clean-up that must follow a command the client may re-send once it reconnects.
   */
  evalWhenConnected(source: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown> {
    return this.#send(false, () => this.#connection.eval(source, keys, args), undefined, this.#evalRefused);
  }

  /** EVALSHA with the timeout (redlock calls this too); `now` as in {@link run}. */
  evalsha(sha: string, keys: readonly string[], args: readonly ScriptArgument[], now?: number): Promise<unknown> {
    return this.#send(this.#failFast, () => this.#connection.evalsha(sha, keys, args), now, this.#evalshaRefused);
  }

  /** EVAL with the timeout (redlock calls this too); `now` as in {@link run}. */
  eval(source: string, keys: readonly string[], args: readonly ScriptArgument[], now?: number): Promise<unknown> {
    return this.#send(this.#failFast, () => this.#connection.eval(source, keys, args), now, this.#evalRefused);
  }

  /**
   * `SET key value PX ttlMs NX` with the timeout: `"OK"` when set, `null` when the key existed. No
   * script, so no cache miss can reorder it. `now` as in {@link run}.
   */
  setIfAbsent(key: string, value: string, ttlMs: number, now?: number): Promise<unknown> {
    return this.#send(this.#failFast, () => this.#connection.setIfAbsent(key, value, ttlMs), now);
  }

  /**
   * `ZREM key member other` with the timeout: the number of the two removed. No script, so no
   * cache miss can reorder it. `now` as in {@link run}.
   */
  removeMembers(key: string, member: string, other: string, now?: number): Promise<unknown> {
    return this.#send(this.#failFast, () => this.#connection.removeMembers(key, member, other), now);
  }

  /**
   * Sends one command, bounded by the timeout. `refuse` (a `failFast` runner's calls, except
   * {@link evalWhenConnected}): rejects at once instead while the connection is down. `now` as in
   * {@link run}.
   */
  #send(
    refuse: boolean,
    send: () => Promise<unknown>,
    now?: number,
    onError?: (error: unknown) => unknown,
  ): Promise<unknown> {
    if (!this.#scripting.allowed) return this.#afterCheck(refuse, send, now ?? performance.now(), onError);
    return this.#sendNow(refuse, send, now, onError);
  }

  /**
   * Resolves once the node was found to run scripts (at once, without a promise, when it already
   * was: `undefined`); rejects with the refusal (an UnsupportedError) when it refuses them. A check
   * that could not reach the node resolves: the call that follows fails on its own. A quorum asks
   * every node before its vote, so that one node's refusal is not outvoted.
   */
  scriptsChecked(): Promise<void> | undefined {
    if (this.#scripting.allowed) return undefined;
    return new Promise((resolve, reject) => {
      this.#gate({
        go: resolve,
        fail: (error) => (error instanceof UnsupportedError ? reject(error) : resolve()),
      });
    });
  }

  /**
   * {@link #sendNow} once the check passed; its timeout still counts from `now`, when the call was
   * made, so the check and the command together settle within it. A method of its own, not a
   * branch of {@link #send}: the closures it makes would give every call of `#send` a context to
   * allocate, checked or not.
   */
  #afterCheck(
    refuse: boolean,
    send: () => Promise<unknown>,
    now: number,
    onError?: (error: unknown) => unknown,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#gate({ go: () => resolve(this.#sendNow(refuse, send, now, onError)), fail: reject });
    });
  }

  /**
   * Queues `entry` behind the check in flight, or starts one. When it ends, the queued entries go
   * (or fail) synchronously, in call order: a command called later cannot overtake one that
   * waited (a clean-up sent right behind the attempt it undoes stays behind it).
   */
  #gate(entry: Gated): void {
    if (this.#scripting.gated !== undefined) {
      this.#scripting.gated.push(entry);
      return;
    }
    this.#scripting.gated = [entry];
    this.#check().then(
      () => {
        this.#scripting.allowed = true;
        for (const gated of this.#takeGated()) gated.go();
      },
      (error: unknown) => {
        for (const gated of this.#takeGated()) gated.fail(error);
      },
    );
  }

  #takeGated(): Gated[] {
    const gated = this.#scripting.gated ?? [];
    this.#scripting.gated = undefined;
    return gated;
  }

  /**
   * The scripting check (see the class comment): resolves when both EVALSHA (or its NOSCRIPT) and
   * EVAL answered, rejects with the refusal, or with the first other failure.
   */
  async #check(): Promise<void> {
    const connection = this.#connection;
    const load = this.#sendNow(this.#failFast, () => connection.scriptLoad(CHECK.source));
    const bySha = this.#sendNow(this.#failFast, () => connection.evalsha(CHECK.sha, [], []));
    const byBody = this.#sendNow(this.#failFast, () => connection.eval(CHECK.source, [], []));
    const [, sha, body] = await Promise.allSettled([load, bySha, byBody]);
    const refused: string[] = [];
    let cause: unknown;
    let failure: unknown;
    for (const [answer, command] of [
      [sha, "EVALSHA"],
      [body, "EVAL"],
    ] as const) {
      if (answer.status === "fulfilled" || isNoScriptError(answer.reason)) continue;
      if (isScriptRefusal(answer.reason, true)) {
        refused.push(command);
        cause ??= answer.reason;
      } else failure ??= answer.reason;
    }
    if (refused.length > 0) throw scriptingRefused(refused, cause);
    if (failure !== undefined) throw failure;
  }

  /**
   * `error` as a script call (`command`) rejects with it: a refusal of the command becomes the
   * UnsupportedError of {@link scriptingRefused}, and the next command checks again.
   */
  #refusal(error: unknown, command: string): unknown {
    if (!isScriptRefusal(error)) return error;
    this.#scripting.allowed = false;
    return scriptingRefused([command], error);
  }

  /** {@link #send} without the check. */
  #sendNow(
    refuse: boolean,
    send: () => Promise<unknown>,
    now?: number,
    onError?: (error: unknown) => unknown,
  ): Promise<unknown> {
    if (refuse) {
      const reason = this.#connection.unavailableReason();
      if (reason !== undefined) return Promise.reject(new Error(`Redis ${this.#label} is not connected (${reason})`));
    }
    let reply: Promise<unknown>;
    try {
      reply = send();
    } catch (error) {
      // A client may throw instead of rejecting (a closed node-redis cluster, say).
      return Promise.reject(error);
    }
    return this.#deadlines.run(reply, this.#timeoutError, now, onError);
  }
}
