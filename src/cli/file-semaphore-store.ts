/**
 * The file store of a `globallock run --limit N` (see store.ts): a {@link FileSemaphore} of limit
 * N, whose permits the runs of a key take one each. Imported only by such a run.
 */
import { FileSemaphore } from "../file/file-semaphore.js";
import type { CliLockerOptions, OpenStore } from "./store.js";

/** Opens a {@link FileSemaphore} of `limit` on `directory` (default: the per-user one). */
export async function openFileSemaphore(
  directory: string | undefined,
  options: CliLockerOptions,
  limit: number,
): Promise<OpenStore> {
  const semaphore = new FileSemaphore({ directory, ...options, limit });
  return {
    locker: semaphore,
    label: `file store ${semaphore.directory}`,
    close: () => semaphore.close(),
  };
}
