import { performance } from "node:perf_hooks";
import { connectionOf } from "./client/connection-of.js";
import type { ScriptArgument } from "./client/redis-connection.js";
import { ScriptRunner } from "./script-runner.js";
import type { RedisClient } from "./types.js";

/**
 * The independent nodes of a Redlock quorum, each through a failing-fast {@link ScriptRunner}
 * (a node that is down votes "failed" at once), and the calls sent to each and not answered yet.
 */
export class QuorumNodes {
  /** One runner per node, in the order of the clients. */
  readonly runners: readonly ScriptRunner[];
  /** How many nodes make a majority. */
  readonly quorum: number;
  /**
   * Per node: tokens of calls (attempts) sent there and not (yet) answered, with until when they
   * are remembered (monotonic ms; no earlier than their keys would expire). The client re-sends
   * such a command when it reconnects — to a node that restarted empty, where it then sets the
   * key — so its clean-up must not be refused while the connection is down (see
   * {@link followUnanswered}).
   */
  readonly #unanswered: ReadonlyArray<Map<string, number>>;
  /** The longest lease asked for so far (ms): how long an unanswered call is remembered. */
  #longest = 0;

  constructor(clients: readonly RedisClient[], commandTimeout: number) {
    this.runners = clients.map(
      (client, index) => new ScriptRunner(connectionOf(client), `node #${index}`, commandTimeout, true),
    );
    this.quorum = Math.floor(clients.length / 2) + 1;
    this.#unanswered = this.runners.map(() => new Map());
  }

  /** A lease of `duration` ms is asked for: unanswered calls are remembered at least that long. */
  leaseAsked(duration: number): void {
    if (duration > this.#longest) this.#longest = duration;
  }

  /**
   * A call of redlock's on `node`, whatever its script: a follow-up of an unanswered call with the
   * same token (redlock's clean-up of a failed attempt) is ordered behind it even while the
   * connection is down; any other call is remembered until it is answered. Either way redlock's
   * vote is refused at once while the connection is down.
   */
  send(node: number, source: string, keys: string[], args: ScriptArgument[]): Promise<unknown> {
    const runner = this.runners[node] as ScriptRunner;
    if (this.followUnanswered(node, source, keys, args)) return runner.eval(source, keys, args);
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
  followUnanswered(node: number, source: string, keys: string[], args: ScriptArgument[]): boolean {
    const runner = this.runners[node] as ScriptRunner;
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
  scriptsChecked(): Promise<unknown> | undefined {
    let checks: Promise<void>[] | undefined;
    for (const runner of this.runners) {
      const check = runner.scriptsChecked();
      if (check === undefined) continue;
      if (checks === undefined) checks = [];
      checks.push(check);
    }
    return checks === undefined ? undefined : Promise.all(checks);
  }
}
