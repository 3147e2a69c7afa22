import { performance } from "node:perf_hooks";
import * as contract from "../backend.js";
import type { ReleaseOutcome } from "../locker.js";
import type { Command, ScanStep } from "./client/redis-connection.js";
import { FENCING_COUNTER_TTL_MS, fencingCounterKey } from "./fencing.js";
import { listHeld, type RedisListing } from "./list-keys.js";
import { ownedToken, ownerTokenPrefix } from "./owner-token.js";
import { WAITERS_MARK } from "./scripts.js";
import { slotGroups } from "./slot-groups.js";
import { unavailable } from "./store-errors.js";
import { lockView } from "./stored-views.js";
import { adoptBySwap, type SwapOutcome } from "./swap-adoption.js";
import type { LaneRouter } from "./transaction-lane.js";
import { leaseHandle, ranOutOnArrival, validUntilOf } from "./validity.js";

/** Settings of {@link ScriptlessStore}. */
export interface ScriptlessStoreSettings {
  readonly driftFactor: number;
  /** The locker's key prefix (see {@link ScriptlessStore.resourceOf}). */
  readonly prefix: string;
  /** The locker's owner: carried in every token it writes (see owner-token.ts). */
  readonly owner: string;
  /** True on a Cluster: keys of one transaction share a hash tag. */
  readonly cluster: boolean;
  /** How the locker hears releases (see redis-backend.ts). */
  readonly watcher: contract.ReleaseWatcher;
  /** A SCAN step for the node, or each master of a Cluster (see {@link ScriptlessStore.list}). */
  readonly scanNodes: () => Promise<ScanStep[]>;
  /** How long one SCAN step may take, in ms (the locker's operation timeout). */
  readonly scanTimeout: number;
}

/**
 * Hooks for tests only (never set in production): `beforeExec` runs between a transaction's reads
 * and its EXEC, so a test can change a watched key there, deterministically.
 */
export const scriptlessHooks: { beforeExec?: ((resource: string) => Promise<void> | void) | undefined } = {};

/**
 * How many times a transaction is tried again after a watched key changed under it before the
 * operation gives up (an extension then fails as a transient error, a release says "unknown"). A
 * lock's own key changes under its holder only when it expires or is taken, and the next read
 * sees that, so more than one retry is already rare.
 */
const MAX_ABORTS = 8;

/** What one round of an optimistic transaction decided once it read (see {@link optimistic}). */
type Decision<T> =
  /** Nothing to write: the transaction ends (UNWATCH) with this answer. */
  | { readonly answer: T }
  /** EXEC these writes; once they ran (sent at `sentAt`), their replies make the answer. */
  | { readonly writes: readonly Command[]; readonly done: (replies: unknown[], sentAt: number) => T };

/**
 * Locks on one Redis node, a Redis Cluster or a Sentinel's master without Lua scripts, for a
 * Redis whose operators refuse them (an ACL without `@scripting`, EVAL and EVALSHA renamed away).
 * What a script does in one step is done by optimistic transactions on a connection of the
 * locker's own (see TransactionLane): WATCH the lock key, read it, and only if it holds our token
 * MULTI, the write, EXEC; an EXEC that finds the key changed since the WATCH does nothing, and the
 * operation reads again. So:
 *
 * - acquire: `SET key token NX PX lease` (one command, as the scripted lean attempt); with fencing,
 *   a transaction that watches the key and its fencing counter, reads both and the server's TIME,
 *   and sets the key and the counter to max(TIME in µs, last + 1) together — the same tokens as
 *   the scripts issue, and the counter rises only with a grant.
 * - release: compare-and-delete (WATCH, GET, MULTI DEL PUBLISH EXEC), publishing the released
 *   token on the key's channel as a scripted release does where there is no queue.
 * - extend: compare-and-PEXPIRE of a whole batch (WATCH the keys, MGET, MULTI PEXPIRE… EXEC);
 *   never re-creates an expired key.
 * - adopt: compare-and-swap of the token; inspect: MULTI GET PTTL EXEC.
 *
 * What it gives up: the cross-process grant queue (its scripts keep it): waiters of other
 * processes hear a release on the key's channel and try again, and poll (`backoff`) for a key
 * that expired; locks only (no semaphores or read-write locks: their permits are counted by
 * scripts); and a release costs two round trips instead of one.
 */
export class ScriptlessStore
  implements contract.Backend, contract.Naming, contract.Fencing, contract.HandOff, contract.Listing
{
  readonly #lanes: LaneRouter;
  readonly #settings: ScriptlessStoreSettings;
  readonly #tokenPrefix: string;
  readonly #listing: RedisListing;
  readonly can: contract.Capabilities = { naming: this, fencing: this, handOff: this, listing: this };
  readonly watcher: contract.ReleaseWatcher;
  /** Handles adopt between lockers of one topology and prefix, scripted or not (same keys, same tokens). */
  readonly scope: string;

  constructor(lanes: LaneRouter, settings: ScriptlessStoreSettings) {
    this.#lanes = lanes;
    this.#settings = settings;
    this.#tokenPrefix = ownerTokenPrefix(settings.owner);
    this.scope = `redis:${settings.cluster ? "cluster" : "node"}:${settings.prefix}`;
    this.#listing = {
      nodes: settings.scanNodes,
      prefix: settings.prefix,
      cluster: settings.cluster,
      inspect: (resource: string) => this.inspect(resource),
      timeoutMs: settings.scanTimeout,
    };
    const watcher = settings.watcher;
    // The lanes close with the locker: the core closes its watcher last, once nothing is in flight.
    this.watcher = {
      watch: (resource) => watcher.watch(resource),
      unwatch: (resource) => watcher.unwatch(resource),
      isWatching: (resource) => watcher.isWatching(resource),
      close: async () => {
        await watcher.close();
        lanes.close();
      },
    };
  }

  resourceOf(key: string): string {
    return this.#settings.prefix + key;
  }

  checkFencing(resource: string): void {
    fencingCounterKey(resource, this.#settings.cluster);
  }

  async acquire({ resource, duration, fencing }: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const token = ownedToken(this.#tokenPrefix, 1);
    const start = performance.now();
    let fencingToken: bigint | undefined;
    try {
      if (fencing) {
        const outcome = await this.#acquireFenced(resource, token, duration);
        if (typeof outcome !== "bigint") return outcome;
        fencingToken = outcome;
      } else if (
        (await this.#lanes.send(resource, ["set", resource, token, "PX", String(duration), "NX"], start)) === null
      ) {
        return { kind: "held" };
      }
    } catch (error) {
      // The attempt may still run when the node answers again: a compare-and-delete queued behind
      // it on the same connection undoes it, so it cannot leave a key nobody owns for a lease.
      void this.release(new contract.LockHandle(token, resource, 0, 0));
      throw unavailable(resource, "acquire", [error], "single");
    }
    const handle = leaseHandle(token, resource, start, duration, this.#settings.driftFactor);
    if (ranOutOnArrival(handle, this)) return { kind: "expired-on-arrival" };
    return fencingToken === undefined ? { kind: "acquired", handle } : { kind: "acquired", handle, fencingToken };
  }

  /**
   * A fenced attempt: the key set and its counter raised in one transaction, only while the key is
   * absent. Answers the fencing token, or the outcome when the key is held.
   */
  #acquireFenced(resource: string, token: string, duration: number): Promise<bigint | contract.AttemptOutcome> {
    const counter = fencingCounterKey(resource, this.#settings.cluster);
    return this.#optimistic(
      resource,
      [resource, counter],
      [["get", resource], ["get", counter], ["time"], ["pttl", resource]],
      ([current, last, time, left]): Decision<bigint | contract.AttemptOutcome> => {
        if (current !== null) return { answer: { kind: "held", retryAfterMs: Math.max(1, Number(left) || 1) } };
        const fence = nextFence(time, last);
        return {
          writes: [
            ["set", resource, token, "PX", String(duration), "NX"],
            ["set", counter, fence.toString(), "PX", String(FENCING_COUNTER_TTL_MS)],
          ],
          done: () => fence,
        };
      },
    );
  }

  async extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    const outcomes = new Array<contract.ExtendOutcome>(handles.length).fill("expired");
    // One transaction per hash tag on a Cluster (its keys share a slot), per batch on one node;
    // a handle whose validity ran out stays "expired": nothing is sent for it.
    const groups = slotGroups(handles, this.#settings.cluster, performance.now());
    await Promise.all(groups.map((indexes) => this.#extendGroup(handles, indexes, duration, outcomes)));
    return outcomes;
  }

  /** Compare-and-PEXPIRE of the handles at `indexes` (keys of one slot), in one transaction. */
  async #extendGroup(
    handles: readonly contract.LockHandle[],
    indexes: readonly number[],
    duration: number,
    outcomes: contract.ExtendOutcome[],
  ): Promise<void> {
    const keys = indexes.map((index) => (handles[index] as contract.LockHandle).resource);
    const first = keys[0] as string;
    try {
      await this.#optimistic(first, keys, [["mget", ...keys]], ([values]): Decision<void> => {
        const found = Array.isArray(values) ? values : [];
        const writes: Command[] = [];
        const extending: number[] = [];
        indexes.forEach((index, position) => {
          const handle = handles[index] as contract.LockHandle;
          outcomes[index] = "taken";
          if (holds(found[position], handle.token)) {
            writes.push(["pexpire", handle.resource, String(duration)]);
            extending.push(index);
          }
        });
        if (writes.length === 0) return { answer: undefined };
        return {
          writes,
          done: (replies, sentAt) => {
            const validUntil = validUntilOf(sentAt, duration, this.#settings.driftFactor);
            extending.forEach((index, position) => {
              if (Number(replies[position]) !== 1) return;
              (handles[index] as contract.LockHandle).renew(sentAt, validUntil);
              outcomes[index] = "extended";
            });
          },
        };
      });
    } catch (error) {
      const failure = unavailable(first, "extend", [error], "single");
      for (const index of indexes) if (outcomes[index] !== "extended") outcomes[index] = failure;
    }
  }

  /**
   * Compare-and-delete, publishing the released token on the key's channel (as a scripted release
   * of a key without a grant queue: waiters of every process listen there). Never rejects.
   */
  async release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    const { resource, token } = handle;
    try {
      return await this.#optimistic(
        resource,
        [resource],
        [["get", resource]],
        ([current]): Decision<ReleaseOutcome> => {
          if (!holds(current, token)) return { answer: current === null ? "expired" : "taken" };
          return {
            writes: [
              ["del", resource],
              ["publish", resource, token],
            ],
            done: () => "released",
          };
        },
      );
    } catch {
      return "unknown";
    }
  }

  /** SCAN steps on the node (a Cluster: each master), then {@link inspect} of each lock key found. */
  list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    return listHeld(this.#listing, prefix, limit);
  }

  /** Who holds `resource` (its token's owner) and for how long: one MULTI GET PTTL EXEC. */
  async inspect(resource: string): Promise<contract.StoredView> {
    let replies: unknown[];
    try {
      replies = await this.#lanes.transaction(resource, async (transaction) => {
        // Nothing is watched, so only a reconnection can abort it: read again.
        for (let tries = 0; tries < MAX_ABORTS; tries++) {
          const read = await transaction.exec([
            ["get", resource],
            ["pttl", resource],
          ]);
          if (read !== null) return read;
        }
        throw new Error(`the reads kept being aborted (${MAX_ABORTS} transactions)`);
      });
    } catch (error) {
      throw unavailable(resource, "inspect", [error], "single");
    }
    const [value, left] = replies;
    const token =
      typeof value === "string" && value.endsWith(WAITERS_MARK) ? value.slice(0, -WAITERS_MARK.length) : value;
    return lockView(token, left, 0);
  }

  /**
   * Swaps the handed-off token for a fresh one of this locker with a lease of `duration`, only
   * while the key still holds it. A failure is undone by a swap back queued behind it on the same
   * connection, so the handle stays adoptable and no key is left with a token nobody has.
   */
  async adopt(request: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const { resource, duration } = request;
    return adoptBySwap(request, ownedToken(this.#tokenPrefix, 1), this.#settings.driftFactor, this, (from, to) =>
      this.#swap(resource, from, to, duration),
    );
  }

  /** Where `resource` holds `from` (marked or not), puts `to` there (keeping the mark) for `duration` ms. */
  #swap(resource: string, from: string, to: string, duration: number): Promise<SwapOutcome> {
    return this.#optimistic(resource, [resource], [["get", resource]], ([current]): Decision<SwapOutcome> => {
      if (!holds(current, from)) return { answer: current === null ? "expired" : "taken" };
      const mark = (current as string).endsWith(WAITERS_MARK) ? WAITERS_MARK : "";
      return { writes: [["set", resource, to + mark, "PX", String(duration)]], done: () => "swapped" };
    });
  }

  /** A fencing token for `handle` while its key still holds its token: the counter raised in one transaction. */
  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const { resource, token } = handle;
    const counter = fencingCounterKey(resource, this.#settings.cluster);
    try {
      return await this.#optimistic(
        resource,
        [resource, counter],
        [["get", resource], ["get", counter], ["time"]],
        ([current, last, time]): Decision<bigint | undefined> => {
          if (!holds(current, token)) return { answer: undefined };
          const fence = nextFence(time, last);
          return {
            writes: [["set", counter, fence.toString(), "PX", String(FENCING_COUNTER_TTL_MS)]],
            done: () => fence,
          };
        },
      );
    } catch (error) {
      throw unavailable(resource, "fencing token", [error], "single");
    }
  }

  /**
   * An optimistic transaction on `resource`'s lane: WATCH `keys`, run `reads`, and let `decide`
   * answer at once (nothing to write: UNWATCH) or name the writes to EXEC. An EXEC that finds a
   * watched key changed does nothing, and the transaction reads again (at most
   * {@link MAX_ABORTS} times, then it fails).
   */
  #optimistic<T>(
    resource: string,
    keys: readonly string[],
    reads: readonly Command[],
    decide: (replies: unknown[]) => Decision<T>,
  ): Promise<T> {
    return this.#lanes.transaction(resource, async (transaction) => {
      for (let tries = 0; tries < MAX_ABORTS; tries++) {
        const decision = decide(await transaction.watch(keys, reads));
        if ("answer" in decision) {
          transaction.unwatch();
          return decision.answer;
        }
        if (scriptlessHooks.beforeExec !== undefined) await scriptlessHooks.beforeExec(resource);
        const sentAt = performance.now();
        const replies = await transaction.exec(decision.writes);
        if (replies !== null) return decision.done(replies, sentAt);
      }
      throw new Error(`the watched keys kept changing (${MAX_ABORTS} transactions aborted)`);
    });
  }
}

/** Whether a lock's value holds `token`, with or without a scripted waiter's mark (see scripts.ts). */
function holds(value: unknown, token: string): boolean {
  return value === token || value === token + WAITERS_MARK;
}

/**
 * The next fencing token, as the scripts issue it (see nextFence in scripts.ts): max(the server's
 * TIME in µs, the last token + 1). `time` is TIME's reply, `last` the counter's value (null: none).
 */
function nextFence(time: unknown, last: unknown): bigint {
  const [seconds, micros] = Array.isArray(time) ? time : [];
  const now = BigInt(String(seconds ?? 0)) * 1_000_000n + BigInt(String(micros ?? 0));
  const previous = typeof last === "string" && /^\d+$/.test(last) ? BigInt(last) : 0n;
  return now > previous ? now : previous + 1n;
}
