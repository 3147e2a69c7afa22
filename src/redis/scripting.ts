import { UnsupportedError } from "../errors.js";

/**
 * A Redis that refuses scripts: an ACL user without `@scripting` (common where operators forbid
 * Lua) answers `NOPERM … 'evalsha' command`, a server with `rename-command EVALSHA ""` (or a proxy
 * that lacks the command) `ERR unknown command 'EVALSHA'`. Every scripted locker needs both EVALSHA
 * and EVAL, so either refusal is found before anything is taken (see ScriptRunner's check) and
 * reported as one {@link UnsupportedError} naming the command and the ways out.
 */

/** The script the check runs: no keys, nothing touched. */
export const CHECK_SCRIPT = "return 1";

/**
 * Whether `error` is a server's refusal of a script command itself (not a failure of the script,
 * nor a refusal of the keys it names): `NOPERM` naming EVAL or EVALSHA, or `ERR unknown command`
 * for one of them. `anyNoperm`: any NOPERM counts (the check's script names no key, so a NOPERM
 * there can only be about the command).
 */
export function isScriptRefusal(error: unknown, anyNoperm = false): boolean {
  if (!(error instanceof Error)) return false;
  const message = error.message;
  if (message.startsWith("NOPERM")) return anyNoperm || /'(?:evalsha|eval)'/i.test(message);
  return /^ERR unknown command\W+(?:evalsha|eval)\b/i.test(message);
}

/**
 * The refusal: an UnsupportedError (code ERR_GLOBALLOCK_UNSUPPORTED) whose message names the
 * refused commands (`commands`, such as `["EVALSHA"]`) and the ways out, with the server's error as
 * its `cause`.
 */
export function scriptingRefused(commands: readonly string[], cause: unknown): UnsupportedError {
  const detail = cause instanceof Error ? cause.message : String(cause);
  return new UnsupportedError(
    `Redis refused ${commands.join(" and ")} (${detail}): the Redis lockers run Lua scripts, and nothing was ` +
      "locked. Grant the locker's ACL user the @scripting category (ACL SETUSER <user> +@scripting), do not " +
      "rename EVAL or EVALSHA away (rename-command), or use new RedisLocker(client, { scripts: false }): plain " +
      "locks through WATCH/MULTI/EXEC, no script needed (no semaphores, read-write locks or Redlock quorum).",
    { cause },
  );
}
