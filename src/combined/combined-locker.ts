import { decodeHandOff } from "../core/hand-off-handle.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkMembers } from "../deployment/combined.js";
import {
  InvalidArgumentError,
  LockerClosedError,
  LockLostError,
  StoreUnavailableError,
  UnsupportedError,
} from "../errors.js";
import { onAnyAbort } from "../internal/abortable.js";
import {
  type AcquireProbe,
  type DiagnosticSource,
  grantTime,
  lostChannel,
  publishLost,
  publishRelease,
} from "../internal/diagnostics.js";
import { mapBounded, resolveListOptions, sortedByKey } from "../internal/list-options.js";
import { Releasable } from "../internal/release-func.js";
import { type AcquireCall, TracedLocker } from "../internal/traced-locker.js";
import { checkCall, checkWeight, resolveAcquireOptions, snapshotOptions } from "../internal/validate.js";
import type {
  AcquireOptions,
  AdoptOptions,
  HolderInfo,
  Lease,
  ListOptions,
  Locker,
  LockInfo,
  ReleaseOutcome,
} from "../locker.js";

/**
 * How many members must hold a key for the {@link CombinedLocker} to hold it: `"all"` of them
 * (one fast local store in front of a shared one: the local one turns away most contenders without
 * a round trip), or a `"majority"` (several independent stores: the lock survives a minority of
 * them failing).
 */
export type CombinedStrategy = "all" | "majority";

/** Options of {@link CombinedLocker}. */
export interface CombinedLockerOptions {
  /** `"all"` (default) or `"majority"`; see {@link CombinedStrategy}. */
  strategy?: CombinedStrategy | undefined;
}

/** Order of badness of release outcomes: the combined release reports the worst. */
const OUTCOME_RANK: Record<ReleaseOutcome, number> = {
  released: 0,
  "handed-off": 0,
  expired: 1,
  taken: 2,
  unknown: 3,
};

/**
 * A {@link Locker} over several member lockers (the Symfony `CombinedStore`): a key is held when
 * all of them (`strategy: "all"`) or a majority of them (`"majority"`) hold it.
 *
 * - **Acquiring.** `tryLock`/`tryAcquire` ask every member at once; short of the strategy, what was
 *   taken is released and the answer is "taken" — or a `StoreUnavailableError` when failed members
 *   could have made the difference. `lock`/`acquire` take the members one after another, in the
 *   order given, each waiting like its own `lock` (so each wakes on that member's release); with
 *   `"majority"` it stops once a majority holds the key and skips members that fail, as long as a
 *   majority is still reachable. Every caller takes members in the same order, so two waiters never
 *   deadlock. A failed or aborted attempt releases whatever it took on the members.
 * - **Loss.** A lease is lost (its `lost` aborts, with the member's reason) as soon as the strategy
 *   no longer holds: with `"all"` when any member's lease is lost; with `"majority"` when fewer
 *   than a majority still hold it (a majority acquisition holds exactly a majority).
 * - **Fencing.** With `"all"`, the token is the first member's (every holder holds the first
 *   member, so its tokens rise with every grant); it must support fencing. With `"majority"` no
 *   single member sees every grant: `{ fencing: true }` is an {@link UnsupportedError}.
 * - **Close.** `close()` refuses new calls and rejects waiters; it does not close the members (the
 *   caller owns them), and leases keep working until released.
 * - **Diagnostics** (kind `"combined-lock"`; see `diagnostics.ts`). The combined locker publishes
 *   its own messages, and its members, which are lockers in their own right, go on publishing
 *   theirs: one combined call is one traced `"combined-lock"` call (`attempts`: 1 once it asked its
 *   members; it never retries, its members do) around its members' traced calls; one combined
 *   release is one release message (the worst member outcome) after its members'; a combined
 *   lease found lost is one lost message, published a microtask after its `lost` aborted so that
 *   it follows the lost message of the member whose loss broke the strategy. There is
 *   no combined extension: extension messages come from the members.
 */
export class CombinedLocker extends TracedLocker implements Locker {
  readonly #members: readonly Locker[];
  readonly #strategy: CombinedStrategy;
  /** Members that must hold a key. */
  readonly #quorum: number;
  readonly #closing = new AbortController();
  #waiting = 0;
  /** Combined leases held: granted, not yet released or lost. */
  #held = 0;
  /** Counts one combined lease fewer held (its release started, or it was lost): called once per lease. */
  readonly #ended = (): void => {
    this.#held -= 1;
  };

  /**
   * @param lockers the member lockers (at least one, distinct), in the order every acquisition takes them.
   * @param options see {@link CombinedLockerOptions}.
   */
  constructor(lockers: readonly Locker[], options?: CombinedLockerOptions) {
    super("combined-lock");
    if (!Array.isArray(lockers) || lockers.length === 0) {
      throw new InvalidArgumentError("lockers", "a non-empty array of Lockers", lockers);
    }
    lockers.forEach((locker: unknown, index) => {
      const candidate = locker as Partial<Locker> | null;
      if (typeof candidate?.acquire !== "function" || typeof candidate.tryAcquire !== "function") {
        throw new InvalidArgumentError(`lockers[${index}]`, "a Locker", locker);
      }
    });
    if (new Set(lockers).size !== lockers.length) {
      throw new InvalidArgumentError("lockers", "distinct Lockers", lockers);
    }
    const { strategy } = snapshotOptions("options", options, ["strategy"]);
    if (strategy !== undefined && strategy !== "all" && strategy !== "majority") {
      throw new InvalidArgumentError("options.strategy", '"all" or "majority"', strategy);
    }
    this.#members = [...lockers];
    const members = this.#members;
    attachDeploymentCheck([this], (signal) => checkMembers(members, signal));
    this.#strategy = strategy ?? "all";
    this.#quorum = this.#strategy === "all" ? lockers.length : Math.floor(lockers.length / 2) + 1;
  }

  /** The strategy in force. */
  get strategy(): CombinedStrategy {
    return this.#strategy;
  }

  /**
   * Number of callers in `lock` or `acquire` that do not hold the key yet: waiting for a member or
   * asking one (a call granted at once counts for the length of its members' round trips).
   */
  get waitingCount(): number {
    return this.#waiting;
  }

  /** Number of combined leases this locker holds: granted, not yet released and not lost. */
  get heldCount(): number {
    return this.#held;
  }

  /**
   * Hand-offs are not supported: a combined lease spans several stores (hand off and adopt its
   * members' leases with their own lockers instead). Rejects with {@link UnsupportedError}.
   */
  async adopt(_signal: AbortSignal | undefined, handle: string, _options?: AdoptOptions): Promise<Lease> {
    decodeHandOff(handle); // a malformed handle is bad input first
    throw new UnsupportedError(`Adopting a lease: ${NO_HAND_OFF}`);
  }

  /**
   * Who holds `key` on the members: a holder (by owner and mode) seen on at least the strategy's
   * quorum of members, with the least time left any of them reports; the most waiters any member
   * reports. Rejects with {@link StoreUnavailableError} when fewer than the quorum answer.
   */
  async inspect(signal: AbortSignal | undefined, key: string): Promise<LockInfo> {
    const settled = await Promise.allSettled(this.#members.map((member) => member.inspect(signal, key)));
    const infos: LockInfo[] = [];
    const errors: unknown[] = [];
    for (const result of settled) {
      if (result.status === "fulfilled") infos.push(result.value);
      else errors.push(result.reason);
    }
    if (infos.length < this.#quorum) {
      if (errors.length === settled.length && !(errors[0] instanceof StoreUnavailableError)) throw errors[0];
      throw this.#unavailable(key, errors);
    }
    return combineInfos(key, infos, this.#quorum);
  }

  /**
   * The keys held on the members, as {@link inspect} tells them: every member lists its held keys
   * (the same `prefix` and `limit`), and each key any of them names is inspected across the
   * members; those held by the strategy's quorum are kept (at most `limit`, sorted by key).
   * Rejects with a member's {@link UnsupportedError} when a member cannot list its keys, and with
   * {@link StoreUnavailableError} when fewer than the quorum of members answer.
   */
  async list(signal: AbortSignal | undefined, options?: ListOptions): Promise<LockInfo[]> {
    const { prefix, limit } = resolveListOptions(signal, options);
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
    signal?.throwIfAborted();
    const settled = await Promise.allSettled(this.#members.map((member) => member.list(signal, { prefix, limit })));
    const keys = new Set<string>();
    const errors: unknown[] = [];
    for (const result of settled) {
      if (result.status === "rejected") errors.push(result.reason);
      else for (const info of result.value) keys.add(info.key);
    }
    const refused = errors.find((error) => error instanceof UnsupportedError);
    if (refused !== undefined) throw refused;
    if (settled.length - errors.length < this.#quorum) {
      if (errors.length === settled.length && !(errors[0] instanceof StoreUnavailableError)) throw errors[0];
      throw this.#unavailable(prefix, errors);
    }
    const infos = await mapBounded([...keys].sort(), 16, (key) => this.inspect(signal, key));
    return sortedByKey(infos.filter((info) => info.holders.length > 0)).slice(0, limit);
  }

  /** A combined lease over `taken`, counted in {@link heldCount} until it is released or lost. */
  #lease(key: string, taken: readonly Lease[], autoExtend: boolean): CombinedLease {
    this.#held += 1;
    return new CombinedLease(this.diagnostics, key, taken, this.#quorum, autoExtend, this.#ended);
  }

  // The calls themselves (see TracedLocker); `probe` is the diagnostics message while traced.

  /** @internal */
  protected async acquireCall(...[signal, key, options, probe]: AcquireCall): Promise<Lease> {
    const [memberOptions, autoExtend] = this.#check(signal, key, options, probe);
    this.#waiting += 1;
    let waiting = true;
    const controller = new AbortController();
    const unlisten = onAnyAbort([signal, this.#closing.signal], (reason) => controller.abort(reason));
    const taken: Lease[] = [];
    const errors: unknown[] = [];
    try {
      for (let index = 0; index < this.#members.length && taken.length < this.#quorum; index++) {
        try {
          taken.push(await (this.#members[index] as Locker).acquire(controller.signal, key, memberOptions[index]));
        } catch (error) {
          if (this.#strategy === "all" || controller.signal.aborted || !(error instanceof StoreUnavailableError)) {
            throw error;
          }
          errors.push(error);
          if (this.#members.length - errors.length < this.#quorum) throw this.#unavailable(key, errors);
        }
      }
      this.#waiting -= 1;
      waiting = false;
      return this.#lease(key, taken, autoExtend);
    } catch (error) {
      if (waiting) this.#waiting -= 1;
      waiting = false;
      await Promise.all(taken.map((lease) => lease.release()));
      throw error;
    } finally {
      unlisten();
    }
  }

  /** @internal */
  protected async tryAcquireCall(...[signal, key, options, probe]: AcquireCall): Promise<Lease | undefined> {
    const [memberOptions, autoExtend] = this.#check(signal, key, options, probe);
    const answers = await Promise.allSettled(
      this.#members.map((member, index) => member.tryAcquire(signal, key, memberOptions[index])),
    );
    const taken: Lease[] = [];
    const errors: unknown[] = [];
    for (const answer of answers) {
      if (answer.status === "rejected") errors.push(answer.reason);
      else if (answer.value !== undefined) taken.push(answer.value);
    }
    const closed = this.#closing.signal.aborted;
    if (taken.length >= this.#quorum && !signal?.aborted && !closed) {
      return this.#lease(key, taken, autoExtend);
    }
    await Promise.all(taken.map((lease) => lease.release()));
    if (signal?.aborted) throw signal.reason;
    if (closed) throw this.#closing.signal.reason;
    const invalid = errors.find((error) => !(error instanceof StoreUnavailableError));
    if (invalid !== undefined) throw invalid;
    // Short of the strategy because members failed (they might have said yes): not a "taken".
    if (taken.length + errors.length >= this.#quorum && errors.length > 0) throw this.#unavailable(key, errors);
    return undefined;
  }

  /** Stops the locker: idempotent; refuses new calls and rejects waiters. The members stay open. */
  override async close(): Promise<void> {
    if (!this.#closing.signal.aborted) this.#closing.abort(new LockerClosedError());
  }

  /**
   * Validates a call before anything is asked of a member (telling `probe` the weight once valid,
   * and its one attempt once the call goes ahead), and returns each member's options — fencing
   * (with `"all"`) is asked of the first member only — and whether the lease is auto-extended.
   */
  #check(
    signal: unknown,
    key: unknown,
    options: unknown,
    probe: AcquireProbe | undefined,
  ): [memberOptions: Array<AcquireOptions | undefined>, autoExtend: boolean] {
    const resolved = resolveAcquireOptions(options);
    checkWeight(resolved.weight, 1, "a lock's limit is 1");
    if (probe !== undefined) probe.weight = resolved.weight;
    checkCall(signal, key, this.#closing.signal);
    if (options === undefined) {
      if (probe !== undefined) probe.attempts = 1;
      return [[], true];
    }
    if (resolved.fencing && this.#strategy === "majority") {
      throw new UnsupportedError(
        'Fencing tokens need one counter that sees every grant; a CombinedLocker with strategy "majority" has none (use "all", whose first member issues them)',
      );
    }
    const { autoExtend, expiry, maxHold } = resolved;
    const plain: AcquireOptions = { autoExtend, expiry, maxHold };
    if (probe !== undefined) probe.attempts = 1;
    return [
      this.#members.map((_, index) => (index === 0 && resolved.fencing ? { ...plain, fencing: true } : plain)),
      autoExtend,
    ];
  }

  #unavailable(key: string, errors: unknown[]): StoreUnavailableError {
    return new StoreUnavailableError(
      key,
      `Too few member lockers answered for "${key}" (strategy ${this.#strategy}: ${this.#quorum} of ${this.#members.length} needed, ${errors.length} failed)`,
      { cause: new AggregateError(errors, "member lockers failed") },
    );
  }
}

/**
 * A combined lease: the members' leases. Lost once fewer than `quorum` of them are still held;
 * released by releasing every member's. Publishes its loss and its release (after the members')
 * as the combined locker `source`, while anyone listens.
 */
class CombinedLease extends Releasable implements Lease {
  readonly key: string;
  readonly #source: DiagnosticSource;
  /** Asked for: kept alive by the members (a `false` lease reaching its expiry is no loss to report). */
  readonly #autoExtend: boolean;
  /** When it was granted, if anyone listened for releases then. */
  readonly #grantedAt = grantTime();
  readonly lost: AbortSignal;
  readonly fencingToken?: bigint;
  readonly #members: readonly Lease[];
  readonly #quorum: number;
  readonly #lost = new AbortController();
  readonly #listeners: Array<() => void> = [];
  #losses = 0;
  /** Tells the locker, once, that this lease is no longer held (released or lost). */
  #onEnded: (() => void) | undefined;

  constructor(
    source: DiagnosticSource,
    key: string,
    members: readonly Lease[],
    quorum: number,
    autoExtend: boolean,
    onEnded: () => void,
  ) {
    super();
    this.#onEnded = onEnded;
    this.#source = source;
    this.#autoExtend = autoExtend;
    this.key = key;
    this.#members = members;
    this.#quorum = quorum;
    this.lost = this.#lost.signal;
    const token = members[0]?.fencingToken;
    if (token !== undefined) this.fencingToken = token;
    for (const member of members) {
      if (member.lost.aborted) {
        this.#memberLost(member.lost.reason);
        continue;
      }
      const listener = (): void => this.#memberLost(member.lost.reason);
      member.lost.addEventListener("abort", listener, { once: true });
      this.#listeners.push(() => member.lost.removeEventListener("abort", listener));
    }
  }

  #memberLost(reason: unknown): void {
    this.#losses += 1;
    if (this.#members.length - this.#losses >= this.#quorum || this.#lost.signal.aborted) return;
    const memberReason = reason instanceof LockLostError ? reason.reason : "taken";
    const error = new LockLostError(this.key, memberReason, { cause: reason });
    this.#end();
    this.#lost.abort(error);
    if (lostChannel.hasSubscribers) {
      // After the member's own lost message, which its locker may publish after aborting `lost`.
      const expected = !this.#autoExtend && memberReason === "expired";
      queueMicrotask(() => publishLost(this.#source, error, expected));
    }
  }

  assertHeld(): void {
    if (this.#lost.signal.aborted) throw this.#lost.signal.reason;
    if (this.started) throw new LockLostError(this.key, "released");
    let held = 0;
    let failure: unknown;
    for (const member of this.#members) {
      try {
        member.assertHeld();
        held += 1;
      } catch (error) {
        failure = error;
      }
    }
    if (held < this.#quorum) throw failure;
  }

  releaseWithOutcome(): Promise<ReleaseOutcome> {
    return this.run();
  }

  handOff(): Promise<string> {
    return Promise.reject(new UnsupportedError(`Handing off a lease: ${NO_HAND_OFF}`));
  }

  #end(): void {
    const ended = this.#onEnded;
    this.#onEnded = undefined;
    ended?.();
  }

  async releaseRoutine(): Promise<ReleaseOutcome> {
    this.#end();
    for (const unlisten of this.#listeners) unlisten();
    const outcomes = await Promise.all(this.#members.map((member) => member.releaseWithOutcome()));
    const worst = outcomes.reduce((a, b) => (OUTCOME_RANK[b] > OUTCOME_RANK[a] ? b : a));
    return publishRelease(this.#source, this.key, this.#grantedAt, worst);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}

/** Why a combined lease cannot be handed off. */
const NO_HAND_OFF =
  "a combined lease spans several stores; hand off its members' leases with their own lockers instead";

/** Members' views of `key` as one: holders seen on at least `quorum` members, the most waiters. */
function combineInfos(key: string, infos: readonly LockInfo[], quorum: number): LockInfo {
  const seen = new Map<string, { holder: HolderInfo; members: number }>();
  for (const info of infos) {
    const counted = new Set<string>();
    for (const holder of info.holders) {
      const id = `${holder.mode} ${holder.owner}`;
      const entry = seen.get(id);
      if (entry === undefined) seen.set(id, { holder, members: 1 });
      else if (!counted.has(id)) {
        entry.members += 1;
        if (holder.expiresInMs < entry.holder.expiresInMs) entry.holder = holder;
      }
      counted.add(id);
    }
  }
  const holders = [...seen.values()].filter((entry) => entry.members >= quorum).map((entry) => entry.holder);
  return { key, holders, waiting: Math.max(0, ...infos.map((info) => info.waiting)) };
}
