import { InvalidArgumentError } from "../errors.js";
import { MAX_TIMER_DELAY_MS, snapshotOptions, validateTimerDelay } from "./validate.js";

/*
 * Options every lease-based locker (Redis, PostgreSQL) resolves the same way from its `expiry`.
 */

/** `operationTimeout`: a timer delay below `expiry / 2`; by default `min(2000, expiry / 4)`. */
export function resolveOperationTimeout(value: unknown, expiry: number): number {
  const operationTimeout = value === undefined ? Math.min(2000, Math.floor(expiry / 4)) : value;
  validateTimerDelay("options.operationTimeout", operationTimeout);
  if (operationTimeout >= expiry / 2) {
    throw new InvalidArgumentError(
      "options.operationTimeout",
      `a number below expiry / 2 (${expiry / 2})`,
      operationTimeout,
    );
  }
  return operationTimeout;
}

const BACKOFF_NAMES = ["min", "max"] as const;

/**
 * `[min, max]` of the safety-net backoff. `max` defaults to `max(1000, min)` and is capped at
 * `expiry / 2` (but never below `min`); both are timer delays, so the result never exceeds
 * {@link MAX_TIMER_DELAY_MS}.
 */
export function resolveBackoff(value: unknown, expiry: number): [min: number, max: number] {
  const given = snapshotOptions("options.backoff", value, BACKOFF_NAMES);
  const min = given.min === undefined ? 50 : given.min;
  validateTimerDelay("options.backoff.min", min);
  const max = given.max === undefined ? Math.max(1000, min) : given.max;
  validateTimerDelay("options.backoff.max", max, min);
  const capped = Math.min(max, Math.floor(expiry / 2), MAX_TIMER_DELAY_MS);
  return [min, Math.max(min, capped)];
}
