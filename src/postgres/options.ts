import { validateCount } from "../internal/validate.js";
import type { PooledLockerOptions, ResolvedPooledLockerOptions } from "../locker-options.js";
import { snapshotPooledOptions } from "../locker-options.js";
import { sqlName } from "../sql/sql-name.js";

/**
 * Options of {@link PostgresLocker}. Every one is optional; `undefined` means the default, `null`
 * and unknown names are rejected.
 */
export interface PostgresLockerOptions extends PooledLockerOptions {
  /**
   * The sequence fencing tokens come from (default `"globallock_fencing"`, optionally
   * schema-qualified), created with `CREATE SEQUENCE IF NOT EXISTS` on the first fenced acquisition.
   */
  fencingSequence?: string | undefined;
  /**
   * How many keys a {@link PostgresLocker} keeps a place in a waiting room for at once, each on a
   * connection from the pool (default `4`; `0`: none). A waiting locker's place queues in
   * PostgreSQL's own lock queue, so lockers waiting for one key take their turns in arrival order,
   * one try per release; a locker without a place (past this many keys, or `0`) tries on every
   * release, as every waiting locker does. Read-write lockers take no places.
   */
  waitingRooms?: number | undefined;
}

/**
 * {@link PostgresLockerOptions} with every default filled in and validated; `sweepConcurrency` is 1
 * (extension statements share the locker's one session).
 */
export interface ResolvedPostgresLockerOptions extends ResolvedPooledLockerOptions {
  /** The sequence fencing tokens come from. */
  readonly fencingSequence: string;
  /** How many keys a locker keeps a place in a waiting room for at once. */
  readonly waitingRooms: number;
}

const OWN_OPTION_NAMES = ["fencingSequence", "waitingRooms"] as const satisfies ReadonlyArray<
  keyof PostgresLockerOptions
>;

/** A lowercase identifier, optionally schema-qualified: used in SQL as written. */
const SEQUENCE_NAME = /^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$/;

/**
 * Validates `options` and fills in the defaults; each option is read exactly once. Throws
 * {@link InvalidArgumentError}.
 */
export function resolvePostgresOptions(options: unknown): ResolvedPostgresLockerOptions {
  const { given, resolved } = snapshotPooledOptions(options, OWN_OPTION_NAMES);
  const fencingSequence = sqlName(
    "options.fencingSequence",
    given.fencingSequence,
    "globallock_fencing",
    SEQUENCE_NAME,
    "a lowercase SQL identifier, optionally schema-qualified (such as globallock_fencing or locks.fencing)",
  );
  const waitingRooms = given.waitingRooms === undefined ? 4 : given.waitingRooms;
  validateCount("options.waitingRooms", waitingRooms);
  return { ...resolved, fencingSequence, waitingRooms };
}
