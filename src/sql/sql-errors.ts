/**
 * What the SQL stores (PostgreSQL, MySQL) say when their server fails them: the same words for
 * both, with the store's name, so that a caller reads one kind of message whichever it uses.
 */
import { StoreUnavailableError } from "../errors.js";
import { checkOutWithin } from "../internal/pool-checkout.js";

/** The SQL stores, as their messages name them. */
export type SqlStore = "PostgreSQL" | "MySQL";

/** The message of `error`, whatever was thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** No connection could be had for `resource`: a StoreUnavailableError with the error as its cause. */
export function serverUnavailable(store: SqlStore, resource: string, error: unknown): StoreUnavailableError {
  return new StoreUnavailableError(resource, `${store} is unavailable: ${messageOf(error)}`, { cause: error });
}

/** A statement on `resource` failed: a StoreUnavailableError with the error as its cause. */
export function statementFailed(store: SqlStore, resource: string, error: unknown): StoreUnavailableError {
  return new StoreUnavailableError(resource, `${store} failed on "${resource}": ${messageOf(error)}`, {
    cause: error,
  });
}

/**
 * Checks a connection out of a pool that is `connecting` it, waiting at most `timeout` ms (one
 * that arrives later goes straight back); a failure is {@link serverUnavailable} for `resource`.
 */
export async function checkOutFor<Connection extends { release(): void }>(
  store: SqlStore,
  connecting: Promise<Connection>,
  timeout: number,
  resource: string,
): Promise<Connection> {
  try {
    return await checkOutWithin(connecting, timeout, store);
  } catch (error) {
    throw serverUnavailable(store, resource, error);
  }
}
