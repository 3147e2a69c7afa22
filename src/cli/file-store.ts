/**
 * The file store of a `globallock` invocation (see store.ts): a {@link FileReadWriteLocker}, whose
 * `write` view takes exclusive runs and `read` view shared ones (`--shared`).
 */
import { readWriteLockKey } from "../file/file-backend.js";
import { FileLocker } from "../file/file-locker.js";
import { FileReadWriteLocker } from "../file/file-read-write-locker.js";
import type { OpenStore } from "./store.js";

/** Opens a {@link FileReadWriteLocker} on `directory` (default: the per-user one). */
export async function openFileStore(
  directory: string | undefined,
  expiry: number | undefined,
  shared: boolean,
): Promise<OpenStore> {
  const locker = new FileReadWriteLocker({ directory, expiry });
  // Reads the writer's lock file (a FileLocker's, by its name): who holds the key exclusively.
  // Shared holders are not shown.
  const files = new FileLocker({ directory: locker.directory });
  return {
    locker: shared ? locker.read : locker.write,
    label: `file store ${locker.directory}`,
    holder: async (key) => {
      const found = await files.inspect(readWriteLockKey(key));
      if (found === undefined || found.stale) return { held: false };
      return {
        held: true,
        pid: found.pid,
        host: found.host,
        acquiredAt: found.acquiredAt,
        ttlMs: found.deadline - Date.now(),
      };
    },
    close: async () => {
      await Promise.all([locker.close(), files.close()]);
    },
  };
}
