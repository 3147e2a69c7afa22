import { performance } from "node:perf_hooks";
import type { ExtendOutcome, LockHandle } from "../backend.js";
import { LockLostError } from "../errors.js";

/** A store's session (connection) that holds locks until it ends (PostgreSQL, MySQL). */
export interface HeartbeatSession {
  /** True once the session ended: every lock on it is gone. */
  readonly ended: boolean;
  /** The tokens of the locks it holds. */
  readonly holds: ReadonlyMap<string, unknown>;
}

/** How a session-bound store confirms its session and names its failures. */
export interface Heartbeat<S extends HeartbeatSession> {
  /** One cheap statement on the session (`SELECT 1`, `DO 1`): its answer confirms every lock on it. */
  ping(session: S): Promise<unknown>;
  /** The store's error for a failed statement on a session that lives on (a transient failure). */
  unavailable(resource: string, error: unknown): Error;
  /** Why the locks of an ended session were lost (default `"taken"`). */
  reasonOf(session: S): "taken" | "expired" | undefined;
  /** The longest a lease is valid from a confirmation, in ms (the locker's `expiry`). */
  readonly expiry: number;
  /** Length of the locker's key prefix (a lost lock's error names the caller's key). */
  readonly prefixLength: number;
}

/**
 * Extends `handles` (see `Backend.extend`) for a store whose locks live on one session: one
 * `ping` confirms them all, each valid for `min(duration, expiry)` from when it was sent. A session
 * that ended loses them all (with its reason and the statement's error as `cause`); a failed ping on
 * a living session is a transient failure of each (retried by the lease keeper).
 */
export async function confirmSession<S extends HeartbeatSession>(
  session: S | undefined,
  handles: readonly LockHandle[],
  duration: number,
  heartbeat: Heartbeat<S>,
): Promise<ExtendOutcome[]> {
  if (session === undefined || session.ended) return handles.map(() => "taken");
  const sentAt = performance.now();
  try {
    await heartbeat.ping(session);
  } catch (error) {
    if (!session.ended) return handles.map(() => heartbeat.unavailable(handles[0]?.resource ?? "", error));
    const reason = heartbeat.reasonOf(session) ?? "taken";
    const prefix = heartbeat.prefixLength;
    return handles.map((handle) => new LockLostError(handle.resource.slice(prefix), reason, { cause: error }));
  }
  const validUntil = sentAt + Math.min(duration, heartbeat.expiry);
  return handles.map((handle) => {
    if (!session.holds.has(handle.token)) return "taken";
    handle.renew(sentAt, validUntil);
    return "extended";
  });
}
