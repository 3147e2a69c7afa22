/** What a failed file-system call says, as the file stores read it. */

/** The error code of a Node.js system error, if any. */
export function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Whether `error` says a path is gone (or a component of it is not a directory any more). */
export function isGone(error: unknown): boolean {
  const code = codeOf(error);
  return code === "ENOENT" || code === "ENOTDIR";
}
