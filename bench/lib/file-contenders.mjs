/**
 * The lockers of scenario 10 (bench/scenarios/file.mjs), each opened on a lock directory as a
 * session with `lock(key) → release` and `close()`:
 *
 * - globallock's FileLocker (default options: expiry 30 s; waiters wake on release via fs.watch;
 *   `syncCalls: "auto"`, so on a local file system its calls run on the event loop), and with
 *   `syncCalls: false` (every call through libuv's thread pool, the default before `"auto"`);
 * - proper-lockfile 4.1.2: `lock(<dir>/<key>, { realpath: false })` (it mkdirs `<key>.lock` and
 *   refreshes its mtime every `update` ms); it has no way to wait for a release, so a blocked
 *   caller polls through its `retries` option: every 1 ms (the fastest it can hand over, at the
 *   cost of a busy poller) and every 25 ms, with `retries: 0` (one attempt) for the uncontended loop.
 */
import { join } from "node:path";
import { FileLocker } from "globallock";
import lockfile from "proper-lockfile";

/** proper-lockfile with a fixed poll every `ms` (retried practically forever). */
function properLockfile(id, label, retries) {
  return {
    id,
    label,
    open(directory) {
      return {
        lock: (key) => lockfile.lock(join(directory, key), { realpath: false, retries }),
        close: async () => undefined,
      };
    },
  };
}

const poll = (ms) => ({ retries: 1_000_000, factor: 1, minTimeout: ms, maxTimeout: ms, randomize: false });

export const FILE_CONTENDERS = {
  globallock: {
    id: "globallock",
    label: "globallock FileLocker",
    open(directory) {
      const locker = new FileLocker({ directory });
      return { lock: (key) => locker.lock(undefined, key), close: () => locker.close() };
    },
  },
  "globallock-pool": {
    id: "globallock-pool",
    label: "globallock FileLocker, `syncCalls: false`",
    open(directory) {
      const locker = new FileLocker({ directory, syncCalls: false });
      return { lock: (key) => locker.lock(undefined, key), close: () => locker.close() };
    },
  },
  "proper-lockfile": properLockfile("proper-lockfile", "proper-lockfile (one attempt)", 0),
  "proper-lockfile-1ms": properLockfile("proper-lockfile-1ms", "proper-lockfile, polling every 1 ms", poll(1)),
  "proper-lockfile-25ms": properLockfile("proper-lockfile-25ms", "proper-lockfile, polling every 25 ms", poll(25)),
};
