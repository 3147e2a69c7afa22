import { readdir, rename, rmdir, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { newToken } from "../internal/token.js";

/** The name of an attempt directory (`.tmp-T`, or a spare `H.tmp-T`) or of an owner file being written. */
const ATTEMPT = /^(?:[0-9a-f]{64})?\.tmp-/;

/**
 * Removes the attempt directories (and owner files being written) of the lock directory
 * `directory` older than `olderThanMs`: left by a process killed while it made an attempt, or
 * spares kept that long. Best effort. A directory is moved aside before it is emptied: a live
 * locker about to take with it (an old spare) then finds it gone and builds another, rather than
 * moving it onto a lock half emptied (see `store.ts`).
 */
export async function sweepAttempts(directory: string, olderThanMs: number): Promise<void> {
  const names = await readdir(directory).catch(() => [] as string[]);
  const cutoff = Date.now() - olderThanMs;
  for (const name of names) {
    if (!ATTEMPT.test(name)) continue;
    const path = join(directory, name);
    try {
      const info = await stat(path);
      if (info.mtimeMs > cutoff) continue;
      // An owner file being written (see `owner.ts`), or an attempt directory.
      if (!info.isDirectory()) {
        await unlink(path);
        continue;
      }
      const swept = join(directory, `.tmp-${newToken()}`);
      await rename(path, swept);
      for (const inner of await readdir(swept)) await rmdir(join(swept, inner));
      await rmdir(swept);
    } catch {
      // Gone meanwhile, or not ours to remove.
    }
  }
}
