import { setMaxListeners } from "node:events";
import { LockerClosedError, UnsupportedError } from "../errors.js";
import { abortable } from "../internal/abortable.js";
import { Backoff } from "../internal/backoff.js";
import { LeaseImpl } from "../internal/lease.js";
import { noopRelease, ReleaseOnce } from "../internal/release-func.js";
import { resolveAcquireOptions, validateKey, validateSignal } from "../internal/validate.js";
import { Waiter, WaitQueues } from "../internal/waiter.js";
import type { AcquireOptions, Lease, Locker, ReleaseFunc, ReleaseOutcome } from "../locker.js";
import { Acquisition } from "./acquisition.js";
import { FENCING_COUNTER_TTL_MS, fencingCounterKey } from "./fencing.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { type RedisLockerOptions, type ResolvedRedisLockerOptions, resolveClients, resolveOptions } from "./options.js";
import { type LockHandle, RedlockAdapter } from "./redlock-adapter.js";
import { ReleaseNotifier } from "./release-notifier.js";
import type { RedisClient } from "./types.js";

/**
 * A {@link Locker} over one Redis node or several (Redlock quorum), for exclusion across processes.
 *
 * - Each acquisition sets `prefix + key` to a random 16-byte token with a TTL of `expiry`; release
 *   is an atomic compare-and-delete that also publishes on the key's channel.
 * - Waiters wake on that publication (one subscriber connection per node, duplicated from the
 *   caller's client), with a jittered backoff as the safety net; in one process they queue FIFO per
 *   key and only the head retries.
 * - One sweeper extends every held lock every `expiry / 2`. A lock found lost is reported through
 *   `onLockLost`; its holder keeps running.
 * - The caller owns the clients: `close()` never closes them.
 */
export class RedisLocker implements Locker {
  readonly #options: ResolvedRedisLockerOptions;
  readonly #clients: readonly RedisClient[];
  readonly #adapter: RedlockAdapter;
  readonly #notifier: ReleaseNotifier;
  readonly #keeper: LeaseKeeper;
  readonly #queues = new WaitQueues();
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #closing = new AbortController();
  #closed: Promise<void> | undefined;

  /**
   * @param clients one ioredis client (single node or Cluster), or one client per independent
   *   Redis node for a Redlock quorum. The caller creates, owns and closes them.
   * @param options see {@link RedisLockerOptions}.
   */
  constructor(clients: RedisClient | RedisClient[], options?: RedisLockerOptions) {
    const list = resolveClients(clients);
    // Every waiter listens for close; many waiters are normal, not a leak.
    setMaxListeners(0, this.#closing.signal);
    this.#options = resolveOptions(options);
    this.#clients = list;
    const { operationTimeout, driftFactor, expiry, sweepConcurrency } = this.#options;
    this.#adapter = new RedlockAdapter(list, { commandTimeout: operationTimeout, driftFactor });
    this.#notifier = new ReleaseNotifier(
      list,
      operationTimeout,
      (channel) => this.#onReleaseMessage(channel),
      () => this.#queues.notifyAllHeads(),
    );
    this.#keeper = new LeaseKeeper(this.#adapter, {
      expiry,
      operationTimeout,
      sweepConcurrency,
      onLockLost: this.#options.onLockLost,
      // A lost lock frees the key as far as this process knows: let the next waiter try.
      onLost: (key) => this.#queues.notifyHead(key),
      track: (operation) => this.#track(operation),
    });
  }

  /** The resolved options (defaults filled in). */
  get options(): Readonly<Omit<ResolvedRedisLockerOptions, "onLockLost">> {
    const { onLockLost: _hook, ...rest } = this.#options;
    return rest;
  }

  /** Number of locks this locker currently holds and extends. */
  get heldCount(): number {
    return this.#keeper.size;
  }

  /** {@inheritDoc Locker.lock} */
  async lock(signal: AbortSignal | undefined, key: string): Promise<ReleaseFunc> {
    this.#checkCall(signal, key);
    return (await this.#obtain(signal, key, false)).releaser.release;
  }

  /** {@inheritDoc Locker.tryLock} */
  async tryLock(signal: AbortSignal | undefined, key: string): Promise<[acquired: boolean, release: ReleaseFunc]> {
    this.#checkCall(signal, key);
    if (this.#keeper.holds(key)) return [false, noopRelease()];
    const acquisition = await this.#attempt(signal, key, false);
    return acquisition === undefined ? [false, noopRelease()] : [true, acquisition.releaser.release];
  }

  /**
   * {@inheritDoc Locker.acquire}
   *
   * Fencing needs a single client (one node or a Cluster): across independent Redlock nodes there
   * is no single counter to rise with every grant, so `{ fencing: true }` with several clients is
   * an {@link UnsupportedError}, thrown before anything is sent.
   */
  async acquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease> {
    const { fencing } = resolveAcquireOptions(options);
    this.#checkCall(signal, key);
    if (fencing) this.#checkFencingSupported(key);
    const acquisition = await this.#obtain(signal, key, fencing);
    return new LeaseImpl({
      key,
      releaser: acquisition.releaser,
      lost: acquisition.lost.signal,
      validUntil: () => acquisition.handle.validUntil,
      onDeadlinePassed: () => this.#keeper.markLost(acquisition, "expired"),
      fencingToken: acquisition.fencingToken,
    });
  }

  /**
   * {@inheritDoc Locker.close}
   *
   * Held locks are neither deleted nor extended any more: they expire within `expiry`. Their
   * releases still work (and still delete the key while its token matches).
   */
  close(): Promise<void> {
    this.#closed ??= this.#shutDown();
    return this.#closed;
  }

  async #shutDown(): Promise<void> {
    this.#closing.abort(new LockerClosedError());
    await this.#keeper.stop();
    await Promise.allSettled([...this.#inFlight]);
    await this.#notifier.close();
  }

  #checkFencingSupported(key: string): void {
    const client = this.#clients[0];
    if (this.#clients.length !== 1 || client === undefined) {
      throw new UnsupportedError(
        `Fencing tokens need a single Redis node or Cluster; this locker has ${this.#clients.length} independent nodes`,
      );
    }
    fencingCounterKey(this.#options.prefix + key, client);
  }

  /** Takes `key` at once if nobody in this process holds or waits for it, else queues for it. */
  async #obtain(signal: AbortSignal | undefined, key: string, fencing: boolean): Promise<Acquisition> {
    // Join the local queue instead of barging when this process already holds or waits for key.
    if (!this.#keeper.holds(key) && this.#queues.size(key) === 0) {
      const acquisition = await this.#attempt(signal, key, fencing);
      if (acquisition !== undefined) return acquisition;
    }
    return this.#waitFor(signal, key, fencing);
  }

  #checkCall(signal: unknown, key: unknown): asserts signal is AbortSignal | undefined {
    validateSignal(signal);
    validateKey(key);
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
    signal?.throwIfAborted();
  }

  /** Blocks in the key's FIFO queue until an attempt succeeds, the signal aborts, or close. */
  async #waitFor(signal: AbortSignal | undefined, key: string, fencing: boolean): Promise<Acquisition> {
    const resource = this.#options.prefix + key;
    const signals = [signal, this.#closing.signal];
    const waiter = new Waiter();
    const backoff = new Backoff(this.#options.backoffMin, this.#options.backoffMax);
    this.#queues.enqueue(key, waiter);
    const subscribed = this.#notifier.subscribe(resource);
    try {
      // Once subscribed, a release cannot slip by unnoticed: the next attempt happens after it.
      await abortable(subscribed, signals);
      for (;;) {
        const mayTry = this.#queues.isHead(key, waiter) && !this.#keeper.holds(key);
        if (mayTry) {
          const acquisition = await this.#attempt(signal, key, fencing);
          if (acquisition !== undefined) return acquisition;
        }
        // Only the head of the queue polls (as a safety net); the others wait for their turn.
        await waiter.wait(mayTry ? backoff.next() : undefined, signals);
      }
    } finally {
      this.#queues.remove(key, waiter);
      this.#notifier.unsubscribe(resource);
    }
  }

  /**
   * One acquisition attempt (plus its fencing token when asked), abortable: if `signal` aborts or
   * the locker closes while it is in flight, it rejects at once and a grant that arrives later is
   * released, never leaked. Resolves to `undefined` when someone else holds the key.
   */
  async #attempt(signal: AbortSignal | undefined, key: string, fencing: boolean): Promise<Acquisition | undefined> {
    const attempt = this.#track(this.#grant(key, fencing));
    let grant: Awaited<typeof attempt>;
    try {
      grant = await abortable(attempt, [signal, this.#closing.signal]);
    } catch (error) {
      attempt
        .then((late) => (late === undefined ? undefined : this.#adapter.release(late.handle)))
        .catch(() => undefined);
      throw error;
    }
    return grant === undefined ? undefined : this.#register(key, grant);
  }

  /** Acquires on Redis and issues the fencing token; the result is not yet tracked. */
  async #grant(key: string, fencing: boolean): Promise<{ handle: LockHandle; fencingToken?: bigint } | undefined> {
    const resource = this.#options.prefix + key;
    const outcome = await this.#adapter.acquire(resource, this.#options.expiry);
    if (outcome.kind !== "acquired") return undefined;
    if (!fencing) return { handle: outcome.handle };
    const client = this.#clients[0] as RedisClient;
    let fencingToken: bigint | undefined;
    try {
      fencingToken = await this.#adapter.issueFencingToken(
        outcome.handle,
        fencingCounterKey(resource, client),
        FENCING_COUNTER_TTL_MS,
      );
    } catch (error) {
      void this.#adapter.release(outcome.handle);
      throw error;
    }
    // No token means the key vanished between grant and token: not a grant after all.
    if (fencingToken === undefined) return undefined;
    return { handle: outcome.handle, fencingToken };
  }

  /** Starts tracking a fresh grant: extension, deadline, and its release. */
  #register(key: string, grant: { handle: LockHandle; fencingToken?: bigint }): Acquisition {
    const acquisition = new Acquisition(key, grant.handle, grant.fencingToken);
    acquisition.releaser = new ReleaseOnce(() => this.#release(acquisition));
    this.#keeper.add(acquisition);
    return acquisition;
  }

  async #release(acquisition: Acquisition): Promise<ReleaseOutcome> {
    this.#keeper.remove(acquisition);
    acquisition.state = "released";
    const outcome = await this.#track(this.#adapter.release(acquisition.handle));
    // Hand over to this process's next waiter without waiting for our own pub/sub message.
    this.#queues.notifyHead(acquisition.key);
    return outcome;
  }

  #onReleaseMessage(channel: string): void {
    const { prefix } = this.#options;
    if (!channel.startsWith(prefix)) return;
    const key = channel.slice(prefix.length);
    // While this locker holds the key, a release message is stale (or our own): ignore it.
    if (!this.#keeper.holds(key)) this.#queues.notifyHead(key);
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    this.#inFlight.add(promise);
    const forget = (): void => {
      this.#inFlight.delete(promise);
    };
    promise.then(forget, forget);
    return promise;
  }
}
