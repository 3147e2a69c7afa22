import { withTimeout } from "../internal/sleep.js";

/**
 * What `checkDeployment` reports: one thing it found about the store a locker runs on, in the
 * user's words, with what to change.
 */
export interface Finding {
  /** `error`: exclusion can break as set up; `warning`: it can under faults; `info`: worth knowing. */
  readonly level: "error" | "warning" | "info";
  /** Stable, e.g. `"redis-eviction-policy"`, `"postgres-transaction-pooler"` (see the reference). */
  readonly code: string;
  /** What was found. */
  readonly message: string;
  /** What to change, when something should. */
  readonly fix?: string;
}

/** A finding (the `fix` left out when there is none). */
export function finding(level: Finding["level"], code: string, message: string, fix?: string): Finding {
  return fix === undefined ? { level, code, message } : { level, code, message, fix };
}

/** The fix of a locker whose pool reaches a server that is not the primary. */
export const PRIMARY_FIX = "Point the locker's pool at the primary";

/** Why a check could not run, as an `info` finding with `code` (the store's error's message). */
export function unchecked(code: string, what: string, error: unknown): Finding {
  const detail = error instanceof Error ? error.message : String(error);
  return finding("info", code, `Could not check ${what}: ${detail}`);
}

/** How long one store may take to answer the few commands of a check, in ms. */
export const CHECK_TIMEOUT_MS = 5000;

/** Runs `check` with a bound: a store that does not answer within `ms` gives its own finding. */
export function within<T>(ms: number, what: string, check: () => Promise<T>): Promise<T> {
  return withTimeout(check(), ms, () => new Error(`${what} did not answer within ${ms} ms`));
}
