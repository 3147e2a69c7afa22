/**
 * A scripted store for testing the lock core's own rules (test/core/ only): the one fake in the
 * test suite. It does not stand in for any real store — every store is tested against a real server
 * — it exists so that the core (LockCore, the wait loop, the lease keeper) can be driven through
 * interleavings a real store produces only by chance: an attempt held in flight while its caller
 * aborts, an extension that fails once, a lease that vanishes, a release the store never announces.
 *
 * It keeps a table of holders (token, resource, validity on the local monotonic clock) and answers
 * from it unless the test scripted the next answer. It records every call it gets, counts attempts
 * in flight per resource, and notes each broken promise of the core to a backend (docs/architecture.md,
 * "What the core guarantees a backend") in {@link FakeBackend.violations}, which every test checks.
 */
import { performance } from "node:perf_hooks";
import {
  type AttemptOutcome,
  type AttemptRequest,
  type Backend,
  type BackendContext,
  type BackendEvents,
  type Capabilities,
  type ExtendOutcome,
  type Fencing,
  LockHandle,
  MAX_EXTEND_BATCH,
  type Naming,
  type StoredView,
} from "../../src/backend.js";
import type { ReleaseOutcome } from "../../src/locker.js";
import { FakeWatcher } from "./fake-watcher.js";
import { Gate } from "./gate.js";

/** The operations the fake records. */
export type Op = "acquire" | "extend" | "release" | "fence";

/** One call the core made, as the fake got it. */
export interface CallRecord {
  readonly op: Op;
  readonly resource: string;
  /** The handle's token (extend, release, fence); for an attempt, the token it was granted, if any. */
  token: string | undefined;
  /** `performance.now()` when the call arrived. */
  readonly at: number;
  /** The handle's `validUntil` when the call arrived (extend, release). */
  readonly validUntil: number | undefined;
  /** A release's `ordered` flag (a clean-up of an abandoned attempt). */
  readonly ordered: boolean | undefined;
  /** Which call it was part of: extensions of one `extendMany` call share it (numbered per op). */
  readonly batch: number;
}

/** What the next attempt answers instead of the table's answer. */
export type AcquireAnswer = "held" | "expired-on-arrival" | Error;
/** What the next extension call answers for each of its handles instead of the table's answer. */
export type ExtendAnswer = "taken" | "expired" | Error;
/** A release's answer instead of the table's (an Error: it rejects, which a backend must not do). */
export type ReleaseAnswer = ReleaseOutcome | Error;

/** One holder of a resource in the table. */
interface Holder {
  readonly token: string;
  /** Until when the store keeps it (its TTL); whole ms, rounded down, as the core's deadlines. */
  validUntil: number;
  /** The validity the store's handle was given: {@link validUntil} less the drift allowance. */
  handleValidUntil: number;
  /** Granted to the core (not planted by {@link FakeBackend.occupy}). */
  readonly mine: boolean;
  /** Its release was sent and has not answered yet. */
  releasing: boolean;
}

let fakes = 0;

/** The scripted store (see the file's comment). Make it, hand {@link attach} to a LockCore. */
export class FakeBackend implements Backend, Naming, Fencing {
  readonly can: Capabilities = { naming: this, fencing: this };
  readonly watcher = new FakeWatcher();
  /** Every call, in arrival order. */
  readonly calls: CallRecord[] = [];
  /** Every broken promise of the core to a backend, in words; a test expects none. */
  readonly violations: string[] = [];
  /** Answers for the next calls of each operation, first in first out (then the table answers). */
  readonly script: { acquire: AcquireAnswer[]; extend: ExtendAnswer[]; release: ReleaseAnswer[] } = {
    acquire: [],
    extend: [],
    release: [],
  };
  /** Real delay before each operation answers, in ms (0: the next microtask). */
  readonly latency: Partial<Record<Op, number>> = {};
  /**
   * Taken off the validity of every handle the store gives (ms), as a quorum store allows for clock
   * drift: the key lives `duration` in the store, the handle says less.
   */
  drift = 0;
  /** Most attempts ever in flight at once, per resource. */
  readonly maxInFlight = new Map<string, number>();
  /** Most extension calls ever in flight at once. */
  maxExtendsInFlight = 0;
  #extendsInFlight = 0;
  readonly #batches: Record<Op, number> = { acquire: 0, extend: 0, release: 0, fence: 0 };
  /** The fencing tokens handed out with grants, in order. */
  readonly fencingTokens: bigint[] = [];
  readonly #id = ++fakes;
  readonly #holders = new Map<string, Holder>();
  /**
   * Leases {@link drop}ped from the table whose extension has not yet answered "taken", by token:
   * their resource and deadline (the core holds them until one or the other).
   */
  readonly #dropped = new Map<string, { resource: string; validUntil: number }>();
  /** Tokens whose release was sent, or that an extension answered lost: never to be extended again. */
  readonly #finished = new Set<string>();
  readonly #inFlight = new Map<string, number>();
  readonly #gates = new Map<Op, Gate[]>();
  #events: BackendEvents | undefined;
  #tokens = 0;
  #fence = 0n;

  /** The backend factory's body: keeps the core's event sink. */
  attach(context: BackendContext): Backend {
    this.#events = context.events;
    return this;
  }

  /** The store's name for a key: prefixed, so a test sees the core passes names, not keys. */
  resourceOf(key: string): string {
    return `fake:${key}`;
  }

  // ---- scripting -------------------------------------------------------------------------

  /** Holds the next call of `op` in flight (after it is recorded, before it answers) until opened. */
  gate(op: Op): Gate {
    const gate = new Gate();
    const gates = this.#gates.get(op) ?? [];
    gates.push(gate);
    this.#gates.set(op, gates);
    return gate;
  }

  /** The next `count` calls of `op` fail with `error` (a release rejects with it). */
  failNext(op: "acquire" | "extend" | "release", error: Error, count = 1): void {
    for (let i = 0; i < count; i++) this.script[op].push(error);
  }

  /** Plants another process's holder of `key` (until {@link vacate}, or `validity` ms). */
  occupy(key: string, validity = Number.POSITIVE_INFINITY): void {
    const validUntil = Math.floor(performance.now() + validity);
    this.#holders.set(this.resourceOf(key), {
      token: `foreign-${++this.#tokens}`,
      validUntil,
      handleValidUntil: validUntil,
      mine: false,
      releasing: false,
    });
  }

  /** Removes whoever holds `key`, announcing nothing (a test calls {@link emitReleased} if it wants). */
  vacate(key: string): void {
    this.#holders.delete(this.resourceOf(key));
  }

  /** The key vanishes under its holder here (evicted, deleted by hand): its next extension finds it "taken". */
  drop(key: string): string {
    const resource = this.resourceOf(key);
    const holder = this.#holders.get(resource);
    if (holder === undefined || !holder.mine) throw new Error(`${key} is not held by the core`);
    this.#holders.delete(resource);
    this.#dropped.set(holder.token, { resource, validUntil: holder.handleValidUntil });
    return holder.token;
  }

  /** The token holding `key` now, if its lease has not run out. */
  holderOf(key: string): string | undefined {
    return this.#alive(this.resourceOf(key))?.token;
  }

  /** The core hears that `key` was released (a release message from another process). */
  emitReleased(key: string): void {
    this.#sink().released(key);
  }

  /** The core hears that release messages may have been missed (a subscriber reconnected). */
  emitMissed(): void {
    this.#sink().missed();
  }

  /** The store found these leases gone at once (a session ended): off the table, and the core told. */
  emitLost(tokens: readonly string[], reason: "taken" | "expired", cause?: unknown): void {
    for (const [resource, holder] of this.#holders) if (tokens.includes(holder.token)) this.#holders.delete(resource);
    for (const token of tokens) this.#finish(token);
    this.#sink().lost(new Set(tokens), reason, cause);
  }

  /** The calls of `op`, for `key` if given. */
  callsOf(op: Op, key?: string): CallRecord[] {
    const resource = key === undefined ? undefined : this.resourceOf(key);
    return this.calls.filter((call) => call.op === op && (resource === undefined || call.resource === resource));
  }

  /** Attempts in flight for `key` now. */
  inFlight(key: string): number {
    return this.#inFlight.get(this.resourceOf(key)) ?? 0;
  }

  // ---- the backend -----------------------------------------------------------------------

  async acquire(request: AttemptRequest): Promise<AttemptOutcome> {
    const { resource } = request;
    const call = this.#record("acquire", resource);
    if (this.watcher.closed) this.#violate(`an attempt on ${resource} after close`);
    if (this.#heldHere(resource)) this.#violate(`an attempt on ${resource}, which the core holds as a lock`);
    const inFlight = (this.#inFlight.get(resource) ?? 0) + 1;
    this.#inFlight.set(resource, inFlight);
    this.maxInFlight.set(resource, Math.max(inFlight, this.maxInFlight.get(resource) ?? 0));
    const scripted = this.script.acquire.shift();
    try {
      await this.#pause("acquire");
      if (scripted instanceof Error) throw scripted;
      if (scripted === "held") return { kind: "held" };
      if (scripted === "expired-on-arrival") return { kind: "expired-on-arrival" };
      if (this.#alive(resource) !== undefined) return { kind: "held" };
      // The lease counts from when the command was sent, as a real store's does.
      const token = `t${this.#id}-${++this.#tokens}`;
      const validUntil = Math.floor(call.at + request.duration);
      const handleValidUntil = validUntil - this.drift;
      this.#holders.set(resource, { token, validUntil, handleValidUntil, mine: true, releasing: false });
      call.token = token;
      const handle = new LockHandle(token, resource, call.at, handleValidUntil);
      if (!request.fencing) return { kind: "acquired", handle };
      const fencingToken = ++this.#fence;
      this.fencingTokens.push(fencingToken);
      return { kind: "acquired", handle, fencingToken };
    } finally {
      this.#inFlight.set(resource, (this.#inFlight.get(resource) ?? 1) - 1);
    }
  }

  async extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    if (handles.length === 0 || handles.length > MAX_EXTEND_BATCH) {
      this.#violate(`an extension call of ${handles.length} handles`);
    }
    if (this.watcher.closed) this.#violate("an extension after close");
    this.#batches.extend += 1;
    const sent = handles.map((handle) => this.#record("extend", handle.resource, handle));
    for (const handle of handles) {
      if (this.#finished.has(handle.token)) this.#violate(`an extension of ${handle.token}, released or lost`);
    }
    const scripted = this.script.extend.shift();
    this.#extendsInFlight += 1;
    this.maxExtendsInFlight = Math.max(this.maxExtendsInFlight, this.#extendsInFlight);
    try {
      await this.#pause("extend");
    } finally {
      this.#extendsInFlight -= 1;
    }
    const now = performance.now();
    return handles.map((handle, index): ExtendOutcome => {
      if (scripted instanceof Error) return scripted;
      const outcome = scripted ?? this.#extend(handle, duration, sent[index]?.at ?? now, now);
      if (outcome === "taken" || outcome === "expired") this.#finish(handle.token);
      return outcome;
    });
  }

  async release(handle: LockHandle, ordered?: boolean): Promise<ReleaseOutcome> {
    const { resource, token } = handle;
    this.#record("release", resource, handle, ordered);
    const holder = this.#holders.get(resource);
    if (holder?.token === token) holder.releasing = true;
    this.#finish(token);
    const scripted = this.script.release.shift();
    await this.#pause("release");
    if (scripted instanceof Error) throw scripted;
    const now = performance.now();
    const current = this.#holders.get(resource);
    let found: ReleaseOutcome = "expired";
    if (current?.token === token) {
      this.#holders.delete(resource);
      found = current.validUntil > now ? "released" : "expired";
    } else if (current !== undefined && current.validUntil > now) found = "taken";
    return scripted ?? found;
  }

  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    this.#record("fence", handle.resource, handle);
    await this.#pause("fence");
    if (this.#alive(handle.resource)?.token !== handle.token) return undefined;
    const fencingToken = ++this.#fence;
    this.fencingTokens.push(fencingToken);
    return fencingToken;
  }

  async inspect(resource: string): Promise<StoredView> {
    const holder = this.#alive(resource);
    if (holder === undefined) return { holders: [], waiting: 0 };
    return {
      holders: [
        { owner: holder.mine ? "core" : "other", weight: 1, expiresInMs: holder.validUntil - performance.now() },
      ],
      waiting: 0,
    };
  }

  // ---- the table -------------------------------------------------------------------------

  /** The table's answer to an extension of `handle` sent at `sentAt`. */
  #extend(handle: LockHandle, duration: number, sentAt: number, now: number): ExtendOutcome {
    if (this.#dropped.delete(handle.token)) return "taken";
    if (handle.validUntil <= now) return "expired";
    const holder = this.#holders.get(handle.resource);
    if (holder?.token !== handle.token || holder.validUntil <= now) return "taken";
    holder.validUntil = Math.floor(sentAt + duration);
    holder.handleValidUntil = holder.validUntil - this.drift;
    handle.renew(sentAt, holder.handleValidUntil);
    return "extended";
  }

  /** The holder of `resource` whose lease has not run out. */
  #alive(resource: string): Holder | undefined {
    const holder = this.#holders.get(resource);
    return holder !== undefined && holder.validUntil > performance.now() ? holder : undefined;
  }

  /**
   * Whether the core holds `resource` as a lock as far as the store can tell: a live grant of its
   * own whose release was not sent, or a lease dropped under it that no extension reported yet.
   */
  #heldHere(resource: string): boolean {
    const holder = this.#alive(resource);
    if (holder?.mine === true && !holder.releasing && holder.handleValidUntil > performance.now()) return true;
    const now = performance.now();
    for (const dropped of this.#dropped.values())
      if (dropped.resource === resource && dropped.validUntil > now) return true;
    return false;
  }

  #finish(token: string): void {
    this.#finished.add(token);
    this.#dropped.delete(token);
  }

  #record(op: Op, resource: string, handle?: LockHandle, ordered?: boolean): CallRecord {
    if (op !== "extend") this.#batches[op] += 1;
    const call: CallRecord = {
      op,
      resource,
      token: handle?.token,
      at: performance.now(),
      validUntil: handle?.validUntil,
      ordered,
      batch: this.#batches[op],
    };
    this.calls.push(call);
    return call;
  }

  /** Waits for the operation's gate, if the test set one, and its latency. */
  async #pause(op: Op): Promise<void> {
    const gate = this.#gates.get(op)?.shift();
    if (gate !== undefined) await gate.pass();
    const ms = this.latency[op] ?? 0;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  }

  #violate(what: string): void {
    this.violations.push(what);
  }

  #sink(): BackendEvents {
    if (this.#events === undefined) throw new Error("The fake backend is not attached to a core");
    return this.#events;
  }
}
