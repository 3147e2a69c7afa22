import { StoreUnavailableError } from "../errors.js";

/** The typed error for a Redis operation that failed for reasons other than contention. */
export function unavailable(resource: string, operation: string, causes: unknown[]): StoreUnavailableError {
  const cause = causes.length === 1 ? causes[0] : new AggregateError(causes, `Redis ${operation} failed`);
  const detail = causes.map((c) => (c instanceof Error ? c.message : String(c))).join("; ");
  return new StoreUnavailableError(
    resource,
    `Redis ${operation} of "${resource}" did not reach a quorum: ${detail || "no node answered"}`,
    { cause },
  );
}
