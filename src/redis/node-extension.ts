import { performance } from "node:perf_hooks";
import type { ExtendOutcome, LockHandle } from "../backend.js";
import type { Script, ScriptRunner } from "./script-runner.js";
import { EXTEND_MANY_PACKED } from "./scripts.js";
import { slotGroups } from "./slot-groups.js";
import { unavailable } from "./store-errors.js";
import { validUntilOf } from "./validity.js";

/** The character EXTEND_MANY and EXTEND_PERMITS answer for a key they extended ("1"). */
const EXTENDED = 49;

/** What {@link NodeExtension} needs of its store. */
export interface NodeExtensionSettings {
  readonly runner: ScriptRunner;
  /** True on a Cluster: a script may only touch keys of one slot. */
  readonly cluster: boolean;
  /** The extension script of the store's keys: EXTEND_MANY for locks, EXTEND_PERMITS for permits. */
  readonly script: Script;
  /** The store's keys are locks (not permit sets): on one node they may go as one argument. */
  readonly lockKeys: boolean;
  readonly driftFactor: number;
}

/**
 * The extensions of a store on one node or Cluster ({@link SingleNodeStore}): one script call
 * per batch, or on a Cluster per group of keys that share a slot.
 */
export class NodeExtension {
  readonly #runner: ScriptRunner;
  readonly #cluster: boolean;
  readonly #script: Script;
  /** Extension batches may send their keys as one argument (see {@link #packsKeys}): locks on one node. */
  readonly #packsLockKeys: boolean;
  readonly #driftFactor: number;

  constructor(settings: NodeExtensionSettings) {
    this.#runner = settings.runner;
    this.#cluster = settings.cluster;
    this.#script = settings.script;
    this.#packsLockKeys = !settings.cluster && settings.lockKeys;
    this.#driftFactor = settings.driftFactor;
  }

  /** Extends each of `handles` to `duration` ms where it still holds its token (see Backend.extend). */
  async extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    // Sized once, not grown: a round of many locks makes many batches.
    const outcomes = new Array<ExtendOutcome>(handles.length).fill("expired");
    const now = performance.now();
    if (!this.#cluster) {
      await this.#extendGroup(handles, undefined, duration, now, outcomes);
      return outcomes;
    }
    const groups = slotGroups(handles, true);
    if (groups.length === 1) await this.#extendGroup(handles, undefined, duration, now, outcomes);
    else {
      await Promise.all(groups.map((indexes) => this.#extendGroup(handles, indexes, duration, now, outcomes)));
    }
    return outcomes;
  }

  /**
   * One extension script call for `handles` (those at `indexes`, or all of them) on one node or
   * slot: fills their `outcomes` (which start as "expired"). A handle whose validity ran out by
   * `now` stays "expired" and is not sent. The tokens go as one space-separated argument and the
   * answer is one character per key (see EXTEND_MANY), rather than an argument and a reply per
   * lock. On one node the keys go as one argument too (see {@link #packsKeys}): the client then
   * lays out a few arguments per batch instead of one per lock (docs/benchmarks.md, "What each
   * speed choice buys").
   */
  async #extendGroup(
    handles: readonly LockHandle[],
    indexes: readonly number[] | undefined,
    duration: number,
    now: number,
    outcomes: ExtendOutcome[],
  ): Promise<void> {
    const count = indexes === undefined ? handles.length : indexes.length;
    // Sized for every lock of the batch, then cut to those sent: no copies as they fill.
    const keys = new Array<string>(count);
    const tokens = new Array<string>(count);
    let filled = 0;
    for (let position = 0; position < count; position++) {
      const index = indexes === undefined ? position : (indexes[position] as number);
      const handle = handles[index] as LockHandle;
      if (now >= handle.validUntil) continue; // "expired": nothing is sent
      keys[filled] = handle.resource;
      tokens[filled] = handle.token;
      filled += 1;
      outcomes[index] = "taken"; // until the answer says otherwise
    }
    if (filled === 0) return;
    keys.length = filled;
    tokens.length = filled;
    const start = performance.now();
    let replies: unknown;
    try {
      const tokenList = tokens.join(" ");
      replies = await (this.#packsKeys(keys)
        ? this.#runner.run(EXTEND_MANY_PACKED, [], [duration, tokenList, keys.join("\0")])
        : this.#runner.run(this.#script, keys, [duration, tokenList]));
    } catch (error) {
      const failure = unavailable(keys[0] as string, "extend", [error], "single");
      for (let position = 0; position < count; position++) {
        const index = indexes === undefined ? position : (indexes[position] as number);
        if (outcomes[index] === "taken") outcomes[index] = failure;
      }
      return;
    }
    const answers = typeof replies === "string" ? replies : "";
    const validUntil = validUntilOf(start, duration, this.#driftFactor);
    let sent = 0;
    for (let position = 0; position < count; position++) {
      const index = indexes === undefined ? position : (indexes[position] as number);
      if (outcomes[index] !== "taken") continue;
      if (answers.charCodeAt(sent) === EXTENDED) {
        (handles[index] as LockHandle).renew(start, validUntil);
        outcomes[index] = "extended";
      }
      sent += 1;
    }
  }

  /**
   * Whether an extension of `keys` goes as one argument (EXTEND_MANY_PACKED): a lock's keys on one
   * node, none holding a NUL byte (the separator). A Cluster routes a script by its declared keys,
   * so there they stay declared; a standalone node lets a script touch keys it was not given, as
   * it always has for scripts without flags. Permits keep their own extension script.
   */
  #packsKeys(keys: readonly string[]): boolean {
    if (!this.#packsLockKeys) return false;
    for (const key of keys) if (key.includes("\0")) return false;
    return true;
  }
}
