import { performance } from "node:perf_hooks";
import * as contract from "../backend.js";
import { StoreUnavailableError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { InFlight } from "../internal/in-flight.js";
import { mapBounded } from "../internal/list-options.js";
import { newToken } from "../internal/token.js";
import type { ReleaseOutcome } from "../locker.js";
import { Cancel, type TableDialect } from "./dialect.js";
import type { ResolvedTableLockerOptions } from "./options.js";
import {
  type AttemptAnswer,
  adoptPlan,
  attemptPlan,
  claimPlan,
  type KeyRows,
  one,
  type Plan,
  removePlan,
} from "./plans.js";
import { TableWatcher } from "./release-bus.js";

/** The share of a lease kept as margin for the database's clock running faster than this one's. */
const DRIFT_FACTOR = 0.01;

/** Keys a listing inspects at once. */
const LIST_CONCURRENCY = 16;

/**
 * The backend of the table lockers, on any {@link TableDialect} (see `PostgresTableLocker`):
 *
 * - A row per lease and per waiter of a key: token, owner, weight, and an expiry on the database's
 *   clock (compared only there). A key's rows are one queue in id order (see `attemptPlan`): a row
 *   holds when it and the rows before it fit the limit (1 for a lock). An attempt is one short
 *   transaction on the key's lock row; a waiter's poll is a read and a renewal of its own row when
 *   that decides it (see `claimPlan`); extending, releasing, adopting, reading are one statement
 *   (MySQL, without RETURNING: two or three).
 * - A lease's validity here counts from when its attempt was sent (monotonic clock), less a drift.
 * - Fencing tokens are row ids: a lock's rows hold in id order, so tokens rise in grant order.
 * - Waiting is polling: a waiter's row (its registration) lives for three polls and a timeout
 *   without one; each attempt renews it and says when the first row ahead expires. Releases wake
 *   this process's other lockers on the same table at once (see {@link TableWatcher}).
 *
 * @param limit permits per key: 1 for a lock.
 */
export function tableBackend(
  dialect: TableDialect,
  options: ResolvedTableLockerOptions,
  limit: number,
): contract.BackendFactory {
  return (context) => new TableBackend(dialect, options, context.owner, context.events, limit);
}

class TableBackend
  implements contract.Backend, contract.Naming, contract.WaitQueue, contract.Fencing, contract.HandOff, contract.Listing
{
  readonly can: contract.Capabilities = {
    naming: this,
    permits: true,
    queue: this,
    fencing: this,
    handOff: this,
    listing: this,
  };
  readonly watcher: TableWatcher;
  /** Handles adopt between lockers of the same kind of database, table and prefix. */
  readonly scope: string;
  readonly #dialect: TableDialect;
  readonly #options: ResolvedTableLockerOptions;
  readonly #owner: string;
  readonly #limit: number;
  /** How long a waiter's row lives without a poll, in ms. */
  readonly #liveness: number;
  readonly #deadlines: DeadlineGroup;
  /** Set once the tables are known to exist (or are not ours to create). */
  #ready: boolean;
  #creating: Promise<void> | undefined;
  /** Deletes of rows an attempt may have left when its answer came too late (close waits for them). */
  readonly #cleanUps = new InFlight();

  constructor(
    dialect: TableDialect,
    options: ResolvedTableLockerOptions,
    owner: string,
    events: ConstructorParameters<typeof TableWatcher>[3],
    limit: number,
  ) {
    this.#dialect = dialect;
    this.#options = options;
    this.#owner = owner;
    this.#limit = limit;
    this.#liveness = 3 * options.backoffMax + options.operationTimeout;
    this.#ready = !options.createTable;
    this.#deadlines = new DeadlineGroup(options.operationTimeout, { inOrder: false });
    this.scope = `table:${dialect.kind}:${options.table}:${options.prefix}`;
    this.watcher = new TableWatcher(dialect.database, options.table, options.prefix, events, () => this.#close());
  }

  resourceOf(key: string): string {
    return this.#options.prefix + key;
  }

  async acquire(request: contract.AttemptRequest): Promise<contract.AttemptOutcome> {
    const { resource: name, duration, queueing, weight } = request;
    const token = newToken();
    const terms = {
      name,
      token,
      owner: this.#owner,
      weight,
      limit: this.#limit,
      duration,
      liveness: this.#liveness,
      join: queueing.joinOnMiss,
      claim: queueing.grantedToken,
    };
    let sentAt = 0;
    const claim = terms.claim;
    // A waiter's poll decides without the key's lock when it can (most polls find it still waits).
    let answer: AttemptAnswer | undefined =
      claim === undefined
        ? undefined
        : await this.#run(name, () => {
            sentAt = performance.now();
            return claimPlan(terms, claim);
          });
    answer ??= await this.#run(
      name,
      () => {
        sentAt = performance.now();
        return attemptPlan(terms);
      },
      true,
      token,
    );
    if (answer.kind === "held") return { kind: "held", retryAfterMs: answer.retryAfterMs };
    if (answer.kind === "queued") {
      const registration = { token: answer.token, weight, sentAt, serverMs: answer.now };
      return { kind: "held", retryAfterMs: answer.retryAfterMs, registration };
    }
    const handle = new contract.LockHandle(answer.token, name, sentAt, boundOf(sentAt, duration));
    if (performance.now() >= handle.validUntil) {
      this.#cleanUps.track(this.release(handle));
      return { kind: "expired-on-arrival" };
    }
    return request.fencing ? { kind: "acquired", handle, fencingToken: answer.id } : { kind: "acquired", handle };
  }

  /** One statement for the batch: the rows still unexpired get `duration` ms more; the others are lost. */
  async extend(handles: readonly contract.LockHandle[], duration: number): Promise<contract.ExtendOutcome[]> {
    const now = performance.now();
    const outcomes: contract.ExtendOutcome[] = handles.map((handle) =>
      now >= handle.validUntil ? "expired" : "taken",
    );
    const tokens = handles.filter((_, index) => outcomes[index] === "taken").map((handle) => handle.token);
    if (tokens.length === 0) return outcomes;
    const sentAt = performance.now();
    try {
      const renewed = await this.#run(
        (handles[0] as contract.LockHandle).resource,
        one({ op: "renew", tokens, ttl: duration }),
      );
      handles.forEach((handle, index) => {
        if (outcomes[index] !== "taken" || !renewed.has(handle.token)) return;
        handle.renew(sentAt, boundOf(sentAt, duration));
        outcomes[index] = "extended";
      });
    } catch (error) {
      for (let index = 0; index < outcomes.length; index++)
        if (outcomes[index] === "taken") outcomes[index] = error as Error;
    }
    return outcomes;
  }

  /** Deletes the lease's row (by its token); wakes this process's waiters of the key. Never rejects. */
  async release(handle: contract.LockHandle): Promise<ReleaseOutcome> {
    try {
      const found = await this.#run(handle.resource, () => removePlan(handle.resource, handle.token));
      this.watcher.publish(handle.resource);
      if (found !== "live") return found;
      return performance.now() >= handle.validUntil ? "expired" : "released";
    } catch {
      // The row stays until it expires.
      return "unknown";
    }
  }

  async leaveQueue(resource: string, _waiterId: string, grantedToken?: string): Promise<void> {
    if (grantedToken === undefined) return;
    try {
      await this.#run(resource, one({ op: "remove", name: resource, token: grantedToken }));
      this.watcher.publish(resource);
    } catch {
      // The row expires after its liveness.
    }
  }

  /** A lease's fencing token: its row's id (while it holds the token). */
  async issueFencingToken(handle: contract.LockHandle): Promise<bigint | undefined> {
    const { now, rows } = await this.#rows(handle.resource);
    return rows.find((row) => row.token === handle.token && row.expiresAt > now)?.id;
  }

  /** The key's rows, in one read: those that fit the limit hold, the others wait. */
  async inspect(resource: string): Promise<contract.StoredView> {
    const { now, rows } = await this.#rows(resource);
    const holders: contract.StoredHolder[] = [];
    let used = 0;
    let waiting = 0;
    for (const row of rows) {
      if (row.expiresAt <= now) continue;
      used += row.weight;
      if (used > this.#limit) {
        waiting += 1;
        continue;
      }
      const holder = { owner: row.owner, weight: row.weight, expiresInMs: row.expiresAt - now };
      holders.push(row.weight >= this.#limit ? { ...holder, fencingToken: row.id } : holder);
    }
    return { holders, waiting };
  }

  /** Names with unexpired rows (one bounded read), then each one's view (a read each). */
  async list(prefix: string, limit: number): Promise<contract.ListedResource[]> {
    const start = this.#options.prefix;
    const names = await this.#run(start + prefix, one({ op: "names", prefix: start + prefix, limit }));
    const views = await mapBounded(names, LIST_CONCURRENCY, (name) => this.inspect(name));
    const listed: contract.ListedResource[] = [];
    names.forEach((name, index) => {
      const view = views[index] as contract.StoredView;
      if (view.holders.length > 0) listed.push({ key: name.slice(start.length), view });
    });
    return listed;
  }

  /** Gives the handed-off row a fresh token and this locker's owner, if it has not expired. */
  async adopt(request: contract.AdoptRequest): Promise<contract.LockHandle | "taken" | "expired"> {
    const { resource, token, duration } = request;
    const fresh = newToken();
    const sentAt = performance.now();
    const found = await this.#run(resource, () => adoptPlan(resource, token, fresh, this.#owner, duration));
    return found === "adopted" ? new contract.LockHandle(fresh, resource, sentAt, boundOf(sentAt, duration)) : found;
  }

  #rows(resource: string): Promise<KeyRows> {
    return this.#run(resource, one({ op: "rows", name: resource }));
  }

  /**
   * Runs `plan` within the operation timeout (the tables created first, once); a failure is a
   * StoreUnavailableError. `orphan`: the token of a row the plan may insert, deleted once the plan
   * settles if its answer came too late to be used.
   */
  async #run<T>(name: string, plan: () => Plan<T>, transactional = false, orphan?: string): Promise<T> {
    if (!this.#ready) await this.#createTables(name);
    const cancel = new Cancel();
    const running = this.#dialect.run(plan, transactional, cancel);
    try {
      return await this.#deadlines.run(running, () => {
        cancel.cancel();
        return new Error(`${this.#dialect.kind} did not answer within ${this.#options.operationTimeout} ms`);
      });
    } catch (error) {
      if (orphan !== undefined) {
        const removeOrphan = (): Promise<unknown> =>
          this.#dialect.run(one({ op: "remove", name, token: orphan }), false, new Cancel());
        this.#cleanUps.track(running.then(removeOrphan, removeOrphan));
      }
      throw unavailable(this.#dialect.kind, name, error);
    }
  }

  #createTables(name: string): Promise<void> {
    this.#creating ??= (async () => {
      try {
        await this.#deadlines.run(this.#dialect.run(one({ op: "create" }), false, new Cancel()), () => {
          return new Error(
            `${this.#dialect.kind} did not create the tables within ${this.#options.operationTimeout} ms`,
          );
        });
        this.#ready = true;
      } catch (error) {
        throw unavailable(this.#dialect.kind, name, error);
      } finally {
        this.#creating = undefined;
      }
    })();
    return this.#creating;
  }

  async #close(): Promise<void> {
    await this.#cleanUps.drained();
    this.#dialect.close();
  }
}

/** The local deadline of a lease of `duration` ms set by a statement sent at `sentAt`. */
function boundOf(sentAt: number, duration: number): number {
  return sentAt + duration * (1 - DRIFT_FACTOR) - 1;
}

/** A failed database call about `name`: a StoreUnavailableError with the error as its cause. */
function unavailable(kind: string, name: string, error: unknown): StoreUnavailableError {
  const message = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(name, `${kind} failed on "${name}": ${message}`, { cause: error });
}
