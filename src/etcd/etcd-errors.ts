import { StoreUnavailableError } from "../errors.js";

/** A failed etcd call about `resource`: a StoreUnavailableError with the error as its cause. */
export function unavailable(resource: string, error: unknown): StoreUnavailableError {
  const message = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(resource, `etcd failed on "${resource}": ${message}`, { cause: error });
}

/** The cause of a loss heard from etcd's side: the held entry deleted ("expired") or replaced ("taken"). */
export class EntryLostError extends Error {
  constructor(key: Buffer, reason: "taken" | "expired") {
    const what =
      reason === "expired" ? "is gone (its lease revoked or run out, or the key deleted)" : "holds another value";
    super(`etcd's entry ${key.toString("utf8")} of a held lock ${what}`);
    this.name = "EntryLostError";
  }
}
