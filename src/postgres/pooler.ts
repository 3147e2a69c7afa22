import { UnsupportedError } from "../errors.js";

/**
 * A session advisory lock is only as good as its session. A pooler in transaction or statement
 * mode (PgBouncer `pool_mode = transaction | statement`, Supavisor's or RDS Proxy's multiplexing)
 * hands the next statement of a client to whichever server connection is free, and the server
 * connection that holds a lock to whichever client comes next: two clients could then hold one
 * lock, and one client's clean-up could free another's.
 *
 * So every session claims its server connection: the custom setting {@link CLAIM_SETTING} holds
 * the session's random token, set only where no other session's token is, and every statement a
 * held lock depends on runs its lock functions only where the setting still holds that token
 * ({@link sameSession}), answering whether it did in a `same` column. A statement that answers
 * `same = false` touched nothing; the session is then found moved, and the locker refuses.
 */
export const CLAIM_SETTING = "globallock.session";

/** SQL: whether this server connection carries the session whose token is parameter `$n`. */
export function sameSession(n: number): string {
  return `current_setting('${CLAIM_SETTING}', true) IS NOT DISTINCT FROM $${n}::text`;
}

/** How a pooler between the locker and PostgreSQL gave itself away. */
export type PoolerSign =
  /** The server connection carried another locker's session when this one claimed it. */
  | "claimed"
  /** A statement ran on another server connection than the session's. */
  | "moved"
  /** Another client's pool had already prepared the locker's statement on this server connection. */
  | "prepared"
  /** A second connection of the pool was handed this session's server connection. */
  | "shared";

const SIGNS: Record<PoolerSign, string> = {
  claimed: "the server connection it was given already carried another locker's session",
  moved: "one of its statements ran on another server connection than the one holding its locks",
  prepared: "its prepared statement already existed on the server connection (another client had prepared it there)",
  shared: "another connection of the same pool was handed the server connection that holds its locks",
};

/**
 * The refusal: an UnsupportedError (code ERR_GLOBALLOCK_UNSUPPORTED) naming the cause and the ways
 * out. `store` names the locker ("PostgreSQL").
 */
export function poolerRefusal(sign: PoolerSign, cause?: unknown): UnsupportedError {
  return new UnsupportedError(
    `PostgreSQL session locks need a session of their own, and this locker's session is shared: ${SIGNS[sign]}. ` +
      "A connection pooler in transaction or statement mode (PgBouncer pool_mode=transaction or statement, " +
      "Supavisor or RDS Proxy multiplexing) shares server sessions between clients, so two of them could hold " +
      "one lock. Use session pooling (PgBouncer pool_mode=session), connect to PostgreSQL directly for the " +
      "locker's pool, or use a store that does not depend on the session (Redis, etcd, lock files).",
    cause === undefined ? undefined : { cause },
  );
}
