/** The file store of a `globallock` invocation (see store.ts): a {@link FileLocker}. */
import { FileLocker } from "../file/file-locker.js";
import type { OpenStore } from "./store.js";

/** Opens a {@link FileLocker} on `directory` (default: the per-user one). */
export async function openFileStore(directory: string | undefined, expiry: number | undefined): Promise<OpenStore> {
  const locker = new FileLocker({ directory, expiry });
  return {
    locker,
    label: `file store ${locker.directory}`,
    holder: async (key) => {
      const found = await locker.inspect(key);
      if (found === undefined || found.stale) return { held: false };
      return {
        held: true,
        pid: found.pid,
        host: found.host,
        acquiredAt: found.acquiredAt,
        ttlMs: found.deadline - Date.now(),
      };
    },
    close: () => locker.close(),
  };
}
