/**
 * The file store of a `globallock` invocation (see store.ts): a {@link FileReadWriteLocker}, whose
 * `write` view takes exclusive runs and `read` view shared ones (`--shared`).
 */
import { FileReadWriteLocker } from "../file/file-read-write-locker.js";
import type { CliLockerOptions, OpenStore } from "./store.js";

/** Opens a {@link FileReadWriteLocker} on `directory` (default: the per-user one). */
export async function openFileStore(
  directory: string | undefined,
  options: CliLockerOptions,
  shared: boolean,
): Promise<OpenStore> {
  // One lock and one release per process: each call on the event loop costs less than its trip
  // through libuv's thread pool (see bench/cli-startup.mjs).
  const locker = new FileReadWriteLocker({ directory, ...options, syncCalls: true });
  return {
    locker: shared ? locker.read : locker.write,
    label: `file store ${locker.directory}`,
    close: () => locker.close(),
  };
}
