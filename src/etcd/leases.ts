import { performance } from "node:perf_hooks";
import type { EtcdLease } from "./types.js";

/**
 * A lock's TTL is bounded on this clock, which may run up to this fraction faster than etcd's
 * leader's (plus a millisecond): a lease is trusted for `TTL × (1 − drift) − 1` ms after the
 * command that set it was sent.
 */
const DRIFT_FACTOR = 0.01;

/** An etcd lease of this locker: granted once, kept alive while it carries anything. */
export class LeaseRecord {
  /** Its etcd id (decimal). */
  readonly id: string;
  /** Its TTL as etcd granted it, in ms. */
  readonly ttlMs: number;
  readonly lease: EtcdLease;
  /** `performance.now()` when the command that last set its TTL was sent. */
  refreshedAt: number;
  /** The local time past which it may have expired. */
  validUntil: number;
  /** Known gone (a keepalive answered TTL 0, or etcd refused a put with it). */
  dead = false;
  /** Tokens of the locks attached to it and not yet released (reported lost with it). */
  readonly tokens = new Set<string>();
  /** The keepalive in flight, if any (concurrent extensions share it). */
  keeping: Promise<number> | undefined;

  constructor(lease: EtcdLease, id: string, ttlMs: number, sentAt: number) {
    this.lease = lease;
    this.id = id;
    this.ttlMs = ttlMs;
    this.refreshedAt = sentAt;
    this.validUntil = boundOf(sentAt, ttlMs);
  }
}

/** A lock or permit held in etcd: its entry's key and value, and the lease it is attached to. */
export interface HeldEntry {
  /** The store's name for its key (what the watcher watches). */
  readonly resource: string;
  /** Its entry's etcd key. */
  readonly key: Buffer;
  /** Its entry's value (compared before a release deletes it). */
  readonly value: Buffer;
  /** The lease its entry is attached to. */
  readonly record: LeaseRecord;
}

/** The lease TTL, in whole seconds, of a lease of `duration` ms. */
export function ttlSecondsOf(duration: number): number {
  return Math.max(1, Math.ceil(duration / 1000));
}

/** The local deadline of a TTL of `ttlMs` set by a command sent at `sentAt`. */
export function boundOf(sentAt: number, ttlMs: number): number {
  return sentAt + ttlMs * (1 - DRIFT_FACTOR) - 1;
}

/** What {@link Leases} needs. */
export interface LeaseSource {
  /** A new lease object of `ttlSeconds` (not yet granted; never kept alive by the client). */
  create(ttlSeconds: number): EtcdLease;
  /** The bound of one command, in ms. */
  readonly timeoutMs: number;
  /** Bounds one command by `timeoutMs` of the store's silence (rejects when it passed). */
  bound<T>(command: Promise<T>): Promise<T>;
  /** Wraps a store failure (a StoreUnavailableError naming `resource`). */
  unavailable(resource: string, error: unknown): Error;
  /** Every handle on `record` is lost (the lease is gone). */
  lost(record: LeaseRecord, cause: unknown): void;
}

/**
 * A locker's etcd leases: one per TTL (in whole seconds; one in all unless acquisitions ask for
 * their own `expiry`), granted lazily, kept alive by keepalives the lease keeper's extensions
 * send (one per lease, shared by every lock on it) and refreshed in the background by attempts
 * once a quarter of its TTL has passed (so a lease carrying only waiters, or short-lived locks,
 * stays alive). A lease past its local deadline is replaced by a new one; it is never revoked
 * while it may carry a lock (close leaves it to expire).
 */
export class Leases {
  readonly #source: LeaseSource;
  readonly #byTtl = new Map<number, LeaseRecord>();
  readonly #granting = new Map<number, Promise<LeaseRecord>>();
  #closed = false;

  constructor(source: LeaseSource) {
    this.#source = source;
  }

  /** This locker's live lease with etcd id `id`, if it has one. */
  find(id: string): LeaseRecord | undefined {
    for (const record of this.#byTtl.values()) if (record.id === id && !record.dead) return record;
    return undefined;
  }

  /** A live lease of `ttlSeconds`, granted if there is none; failures are StoreUnavailableErrors. */
  async get(ttlSeconds: number, resource: string): Promise<LeaseRecord> {
    const current = this.#byTtl.get(ttlSeconds);
    const now = performance.now();
    // Margin: the attempt that uses it must land while it lives.
    if (current !== undefined && !current.dead && current.validUntil - this.#source.timeoutMs > now) {
      if (now - current.refreshedAt > current.ttlMs / 4 && current.keeping === undefined) {
        void this.keepAlive(current).catch(() => undefined);
      }
      return current;
    }
    if (current !== undefined) this.#drop(current);
    let granting = this.#granting.get(ttlSeconds);
    if (granting === undefined) {
      granting = this.#grant(ttlSeconds, resource).finally(() => this.#granting.delete(ttlSeconds));
      this.#granting.set(ttlSeconds, granting);
    }
    return granting;
  }

  async #grant(ttlSeconds: number, resource: string): Promise<LeaseRecord> {
    const lease = this.#source.create(ttlSeconds);
    // etcd3 reports a failed grant as "lost" too: without a listener that would be harmless, but
    // an EventEmitter with no listener for an event is fine only for events other than "error".
    lease.on("lost", ignore);
    const sentAt = performance.now();
    let id: string;
    try {
      id = await this.#source.bound(lease.grant());
    } catch (error) {
      lease.release();
      throw this.#source.unavailable(resource, error);
    }
    // etcd may grant more than asked (its minimum TTL): the first keepalive tells; until then, ours.
    const record = new LeaseRecord(lease, id, ttlSeconds * 1000, sentAt);
    if (this.#closed) lease.release();
    else this.#byTtl.set(ttlSeconds, record);
    return record;
  }

  /**
   * Sends one keepalive for `record` (or joins the one in flight) and resolves with the time it
   * was sent; a lease etcd no longer has is declared dead (every handle on it lost) and rejects
   * with a LeaseGoneError. Other failures reject with the store's error.
   */
  keepAlive(record: LeaseRecord): Promise<number> {
    if (record.dead) return Promise.reject(new LeaseGoneError(record.id));
    record.keeping ??= this.#sendKeepAlive(record).finally(() => {
      record.keeping = undefined;
    });
    return record.keeping;
  }

  async #sendKeepAlive(record: LeaseRecord): Promise<number> {
    const sentAt = performance.now();
    const { timeoutMs } = this.#source;
    const answer = await this.#source
      .bound(record.lease.keepaliveOnce({ deadline: Date.now() + 2 * timeoutMs }))
      .catch((error: unknown) => {
        // etcd3 throws its EtcdLeaseInvalidError for TTL 0.
        if (isLeaseGone(error)) return { TTL: "0" };
        throw error;
      });
    const ttl = Number(answer.TTL);
    if (!(ttl > 0)) {
      const gone = new LeaseGoneError(record.id);
      this.markDead(record, gone);
      throw gone;
    }
    if (sentAt > record.refreshedAt) {
      record.refreshedAt = sentAt;
      record.validUntil = boundOf(sentAt, Math.min(record.ttlMs, ttl * 1000));
    }
    return sentAt;
  }

  /** `record` is gone from etcd: every handle on it is lost, and the next attempt grants anew. */
  markDead(record: LeaseRecord, cause: unknown): void {
    if (record.dead) return;
    record.dead = true;
    this.#drop(record);
    this.#source.lost(record, cause);
  }

  #drop(record: LeaseRecord): void {
    if (this.#byTtl.get(record.ttlMs / 1000) === record) this.#byTtl.delete(record.ttlMs / 1000);
    record.lease.release();
  }

  /**
   * Stops granting and refreshing. Leases that carry no held handle are revoked (bounded, errors
   * ignored); the others are left to expire under their holders.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled(this.#granting.values());
    const revoking: Array<Promise<unknown>> = [];
    for (const record of this.#byTtl.values()) {
      if (record.tokens.size === 0) {
        const { timeoutMs } = this.#source;
        revoking.push(this.#source.bound(record.lease.revoke({ deadline: Date.now() + timeoutMs })));
      } else record.lease.release();
    }
    this.#byTtl.clear();
    await Promise.allSettled(revoking);
  }
}

/** etcd no longer has the lease (expired or revoked). */
export class LeaseGoneError extends Error {
  constructor(id: string) {
    super(`etcd lease ${id} is gone (expired or revoked)`);
    this.name = "LeaseGoneError";
  }
}

/** Whether `error` says that etcd does not know the lease (etcd3's EtcdLeaseInvalidError). */
export function isLeaseGone(error: unknown): boolean {
  return (
    error instanceof LeaseGoneError ||
    (error instanceof Error &&
      (error.constructor.name === "EtcdLeaseInvalidError" || /lease not found/.test(error.message)))
  );
}

export function timedOut(ms: number): Error {
  return new Error(`etcd did not answer within ${ms} ms`);
}

function ignore(): void {}
