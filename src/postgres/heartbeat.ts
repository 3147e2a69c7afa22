import { performance } from "node:perf_hooks";
import type { ExtendOutcome } from "../diagnostics.js";
import { type DiagnosticSource, extendChannel, publishExtend } from "../internal/diagnostics.js";
import type { Hold } from "./hold.js";
import type { Session } from "./session.js";

/**
 * One heartbeat of a `PostgresLocker` in flight, observed for the extend channel: a `SELECT 1`
 * that confirms the session, and so extends every auto-extended lease on it. Made only while
 * anyone listens (see {@link startHeartbeat}).
 */
export interface Heartbeat {
  /** The session it confirms. */
  readonly session: Session;
  /** It was answered: publishes `"extended"` for the auto-extended leases on the session. */
  succeeded(): void;
  /**
   * It failed and the session ended (the leases are lost with `reason`): publishes that outcome
   * with the error, before the leases' lost messages.
   */
  failed(reason: "taken" | "expired", cause: unknown): void;
}

/**
 * Starts observing a heartbeat that was due at `plannedAt` (`performance.now()` time): returns
 * `undefined` — and reads no clock — while nobody listens on the extend channel.
 */
export function startHeartbeat(source: DiagnosticSource, session: Session, plannedAt: number): Heartbeat | undefined {
  if (!extendChannel.hasSubscribers) return undefined;
  const sentAt = performance.now();
  const lagMs = Number.isFinite(plannedAt) ? Math.max(0, sentAt - plannedAt) : 0;
  const publish = (outcome: ExtendOutcome, error: Error | undefined): void => {
    if (!extendChannel.hasSubscribers) return;
    const keys: string[] = [];
    for (const hold of session.holds as Set<Hold>) if (hold.request.autoExtend) keys.push(hold.key);
    const [key] = keys;
    if (key === undefined) return; // nothing held that it extends
    const elapsedMs = performance.now() - sentAt;
    publishExtend({ key, keys, count: keys.length, ...source, outcome, error, lagMs, elapsedMs });
  };
  return {
    session,
    succeeded: () => publish("extended", undefined),
    failed: (reason, cause) => publish(reason, cause instanceof Error ? cause : new Error(String(cause))),
  };
}
