import { InvalidArgumentError } from "../errors.js";
import { validateOptionsObject } from "../internal/validate.js";

/** A semaphore's options bag split: its `limit` and the rest, a locker's options. */
export interface SplitSemaphoreOptions {
  /** Permits per key: a safe integer >= 1. */
  readonly limit: number;
  /** Every other option, copied (the caller's bag is never written to). */
  readonly rest: Readonly<Record<string, unknown>>;
}

/**
 * Validates a semaphore's options bag (an options object; `limit` is required) and splits it into
 * its `limit`, read once, and the rest. Throws `InvalidArgumentError`.
 */
export function splitSemaphoreOptions(options: unknown): SplitSemaphoreOptions {
  validateOptionsObject("options", options);
  const { limit, ...rest } = (options ?? {}) as { readonly limit?: unknown };
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1) {
    throw new InvalidArgumentError("options.limit", "a safe integer >= 1 (permits per key)", limit);
  }
  return { limit, rest };
}
