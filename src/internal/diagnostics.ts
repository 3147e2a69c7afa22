/**
 * Publishing on the channels of `../diagnostics.ts`. Every helper here is called only after a
 * `hasSubscribers` check (or checks itself first), so a locker nobody observes builds no message,
 * creates no closure and reads no clock.
 */
import { channel, tracingChannel } from "node:diagnostics_channel";
import { performance } from "node:perf_hooks";
import {
  ACQUIRE_CHANNEL,
  type AcquireMessage,
  type AcquireMode,
  type AcquireOutcome,
  EXTEND_CHANNEL,
  type ExtendMessage,
  LOST_CHANNEL,
  type LockerKind,
  type LostMessage,
  RELEASE_CHANNEL,
  type ReleaseMessage,
} from "../diagnostics.js";
import { LockerClosedError, type LockLostError } from "../errors.js";
import type { Locker, ReleaseOutcome } from "../locker.js";

/** Who publishes: one object per public locker, made once (messages copy its two fields). */
export interface DiagnosticSource {
  readonly locker: Locker;
  readonly kind: LockerKind;
}

/** An {@link AcquireMessage} as the locker fills it in while the call runs. */
export type AcquireProbe = { -readonly [K in keyof AcquireMessage]: AcquireMessage[K] };

const acquireTracing = tracingChannel<unknown, AcquireProbe>(ACQUIRE_CHANNEL);
/** The channels of releases, extensions and losses (published on only after a subscriber check). */
export const releaseChannel = channel(RELEASE_CHANNEL);
export const extendChannel = channel(EXTEND_CHANNEL);
export const lostChannel = channel(LOST_CHANNEL);

/**
 * True while anyone listens on any event of the acquire tracing channel. (`TracingChannel`'s own
 * `hasSubscribers` exists from Node.js 20.13; before, its five channels are asked one by one.)
 */
export const acquireTraced: () => boolean =
  typeof (acquireTracing as { hasSubscribers?: unknown }).hasSubscribers === "boolean"
    ? () => acquireTracing.hasSubscribers
    : () =>
        acquireTracing.start.hasSubscribers ||
        acquireTracing.end.hasSubscribers ||
        acquireTracing.asyncStart.hasSubscribers ||
        acquireTracing.asyncEnd.hasSubscribers ||
        acquireTracing.error.hasSubscribers;

/**
 * Runs one acquisition call under the acquire tracing channel (call only when
 * {@link acquireTraced}), publishing its events as `TracingChannel.tracePromise` does — `start`
 * (with the stores bound to it entered for the call), `end` once the call returned its promise,
 * then `error` (on rejection), `asyncStart` and `asyncEnd` — at about half its cost: no extra
 * promise or closures per call. `run` gets the message and fills in `weight` and `attempts` as it
 * goes; this fills in `outcome` and `waitedMs` (and `result` or `error`) before the call settles.
 */
export function traceAcquire<T>(
  source: DiagnosticSource,
  mode: AcquireMode,
  key: string,
  weight: number | undefined,
  signal: AbortSignal | undefined,
  run: (probe: AcquireProbe) => Promise<T>,
): Promise<T> {
  const probe: AcquireProbe = {
    key,
    locker: source.locker,
    kind: source.kind,
    mode,
    weight,
    attempts: 0,
    waitedMs: undefined,
    outcome: undefined,
  };
  const startedAt = performance.now();
  return acquireTracing.start.runStores(probe, () => {
    try {
      return settle(run(probe), probe, signal, startedAt);
    } finally {
      acquireTracing.end.publish(probe);
    }
  });
}

/** Waits for a traced call and publishes how it ended (see {@link traceAcquire}). */
async function settle<T>(
  call: Promise<T>,
  probe: AcquireProbe,
  signal: AbortSignal | undefined,
  startedAt: number,
): Promise<T> {
  let failed = false;
  try {
    const result = await call;
    probe.outcome = isMiss(result) ? "not-acquired" : "acquired";
    probe.result = result;
    return result;
  } catch (error) {
    failed = true;
    probe.outcome = failureOf(error, signal);
    probe.error = error;
    throw error;
  } finally {
    probe.waitedMs = performance.now() - startedAt;
    if (failed) acquireTracing.error.publish(probe);
    acquireTracing.asyncStart.publish(probe);
    acquireTracing.asyncEnd.publish(probe);
  }
}

/** `tryAcquire`'s `undefined` and `tryLock`'s `[false, …]`. */
function isMiss(result: unknown): boolean {
  return result === undefined || (Array.isArray(result) && result[0] === false);
}

function failureOf(error: unknown, signal: AbortSignal | undefined): AcquireOutcome {
  if (signal?.aborted === true && error === signal.reason) return "aborted";
  return error instanceof LockerClosedError ? "closed" : "error";
}

/** The time of a grant, for a later {@link publishRelease}: taken only while anyone listens. */
export function grantTime(): number | undefined {
  return releaseChannel.hasSubscribers ? performance.now() : undefined;
}

/** Publishes what a release found (if anyone listens) and returns it. */
export function publishRelease(
  source: DiagnosticSource,
  key: string,
  grantedAt: number | undefined,
  outcome: ReleaseOutcome,
): ReleaseOutcome {
  if (releaseChannel.hasSubscribers) {
    const message: ReleaseMessage = {
      key,
      locker: source.locker,
      kind: source.kind,
      heldMs: grantedAt === undefined ? undefined : performance.now() - grantedAt,
      outcome,
    };
    releaseChannel.publish(message);
  }
  return outcome;
}

/** Publishes a lost lease (if anyone listens). */
export function publishLost(source: DiagnosticSource, error: LockLostError, expected: boolean): void {
  if (!lostChannel.hasSubscribers) return;
  const message: LostMessage = {
    key: error.key,
    locker: source.locker,
    kind: source.kind,
    reason: error.reason,
    error,
    expected,
  };
  lostChannel.publish(message);
}

/** Publishes one extension message (call only while {@link extendChannel} has subscribers). */
export function publishExtend(message: ExtendMessage): void {
  extendChannel.publish(message);
}
