import { StoreUnavailableError, UnsupportedError } from "../errors.js";

/** How the failed operation was sent: to one node or Cluster, or to every node of a Redlock quorum. */
export type Topology = "single" | "quorum";

/**
 * The typed error for a Redis operation that failed for reasons other than contention, worded for
 * the setup the user has: a quorum names the nodes' failures, a single node (or Cluster) its own.
 * A node that refuses scripts is not a store that is down: its refusal (an UnsupportedError, see
 * scripting.ts) is the answer, whatever the other nodes said.
 */
export function unavailable(
  resource: string,
  operation: string,
  causes: unknown[],
  topology: Topology,
): StoreUnavailableError | UnsupportedError {
  for (const cause of causes) if (cause instanceof UnsupportedError) return cause;
  const cause = causes.length === 1 ? causes[0] : new AggregateError(causes, `Redis ${operation} failed`);
  // An error without a message (some client errors have none) is named by its class.
  const detail = causes.map((c) => (c instanceof Error ? c.message || c.constructor.name : String(c))).join("; ");
  const what = topology === "quorum" ? "did not reach a quorum" : "failed";
  return new StoreUnavailableError(
    resource,
    `Redis ${operation} of "${resource}" ${what}: ${detail || "no node answered"}`,
    {
      cause,
    },
  );
}
