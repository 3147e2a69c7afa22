import { UnsupportedError } from "../errors.js";

/**
 * How a proxy between a session-lock locker (PostgreSQL, MySQL) and its server gave itself away:
 * the locker's server session is shared with other clients, so its session locks prove nothing.
 */
export type SharingSign =
  /** The server connection carried another locker's session when this one claimed it. */
  | "claimed"
  /** A statement ran on another server connection than the one holding the locker's locks. */
  | "moved"
  /** Another client had already prepared the locker's statement on this server connection. */
  | "prepared"
  /** Another connection of the same pool was handed the server connection that holds the locks. */
  | "shared";

const SIGNS: Record<SharingSign, string> = {
  claimed: "the server connection it was given already carried another locker's session",
  moved: "one of its statements ran on another server connection than the one holding its locks",
  prepared: "its prepared statement already existed on the server connection (another client had prepared it there)",
  shared: "another connection of the same pool was handed the server connection that holds its locks",
};

/**
 * The refusal of a locker whose server session is shared: an UnsupportedError (code
 * ERR_GLOBALLOCK_UNSUPPORTED) that names the sign, then `explanation` (which proxies do this, and
 * the ways out).
 */
export function sharedSessionError(
  locks: string,
  sign: SharingSign,
  explanation: string,
  cause?: unknown,
): UnsupportedError {
  return new UnsupportedError(
    `${locks} need a session of their own, and this locker's session is shared: ${SIGNS[sign]}. ${explanation}`,
    cause === undefined ? undefined : { cause },
  );
}
