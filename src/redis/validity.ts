import { performance } from "node:perf_hooks";
import { LockHandle } from "../backend.js";

/*
 * How long a Redis lease is trusted here: its TTL less the clock drift a node may have against
 * this process (`driftFactor` of it) and Redis's expiry precision. The same bound redlock uses, so
 * every Redis store, quorum or not, trusts a lease alike.
 */

/** What a lease of `duration` ms may have lost to drift and precision by the time it expires. */
function driftOf(driftFactor: number, duration: number): number {
  // Redis expires keys with 1 ms precision; redlock adds the same 2 ms.
  return Math.round(driftFactor * duration) + 2;
}

/** The local time until which a lease of `duration` ms set by a command sent at `sentAt` holds. */
export function validUntilOf(sentAt: number, duration: number, driftFactor: number): number {
  return sentAt + duration - driftOf(driftFactor, duration);
}

/**
 * The handle of a lease of `duration` ms on `resource` under `token`, set by a command sent at
 * `sentAt`: valid until {@link validUntilOf} says.
 */
export function leaseHandle(
  token: string,
  resource: string,
  sentAt: number,
  duration: number,
  driftFactor: number,
): LockHandle {
  return new LockHandle(token, resource, sentAt, validUntilOf(sentAt, duration, driftFactor));
}

/**
 * Whether `handle`, just granted, ran out before the answer that granted it arrived: its key is
 * then released at once (the node may still hold it for a moment), and the grant is of no use.
 */
export function ranOutOnArrival(handle: LockHandle, store: { release(handle: LockHandle): Promise<unknown> }): boolean {
  if (performance.now() < handle.validUntil) return false;
  void store.release(handle);
  return true;
}
