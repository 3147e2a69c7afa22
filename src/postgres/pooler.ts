import type { UnsupportedError } from "../errors.js";
import { type SharingSign, sharedSessionError } from "../internal/shared-session.js";

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
 * ({@link sameSession}), answering whether it did: in a `same` column, or as NULL in the column
 * that answers what it did (see `Statement.claim`). A statement that answers it ran elsewhere
 * touched nothing; the session is then found moved, and the locker refuses.
 */
export const CLAIM_SETTING = "globallock.session";

/** SQL: whether this server connection carries the session whose token is parameter `$n`. */
export function sameSession(n: number): string {
  return `current_setting('${CLAIM_SETTING}', true) IS NOT DISTINCT FROM $${n}::text`;
}

/**
 * The refusal: an UnsupportedError (code ERR_GLOBALLOCK_UNSUPPORTED) naming the cause and the ways
 * out.
 */
export function poolerRefusal(sign: SharingSign, cause?: unknown): UnsupportedError {
  return sharedSessionError(
    "PostgreSQL session locks",
    sign,
    "A connection pooler in transaction or statement mode (PgBouncer pool_mode=transaction or statement, " +
      "Supavisor or RDS Proxy multiplexing) shares server sessions between clients, so two of them could hold " +
      "one lock. Use session pooling (PgBouncer pool_mode=session), connect to PostgreSQL directly for the " +
      "locker's pool, or use a store that does not depend on the session (Redis, etcd, lock files).",
    cause,
  );
}
