/**
 * The lockers of scenario 11 (bench/scenarios/file.mjs), each opened on a lock directory as a
 * session with `lock(key) → release` and `close()`:
 *
 * - globallock's FileLocker (default options: expiry 30 s; waiters wake on release via fs.watch;
 *   `syncCalls: "auto"`, so its calls run on the event loop on a file system in memory and through
 *   libuv's thread pool elsewhere), and with `syncCalls: false` (every call through the thread
 *   pool, also in memory);
 * - proper-lockfile 4.1.2: `lock(<dir>/<key>, { realpath: false })` (it mkdirs `<key>.lock` and
 *   refreshes its mtime every `update` ms); it has no way to wait for a release, so a blocked
 *   caller polls through its `retries` option: every 1 ms (the fastest it can hand over, at the
 *   cost of a busy poller) and every 25 ms, with `retries: 0` (one attempt) for the uncontended loop;
 * - the raw floor of FileLocker's design (`raw-rename`, uncontended loop only): the calls a
 *   FileLocker makes for a lock + release in steady state through the thread pool — `mkdir` of the
 *   entry in a spare attempt directory, `rename` of that directory onto the (absent) lock, `rename`
 *   of the entry out of the lock (it becomes the next spare), and a `rmdir` of the emptied lock not
 *   waited for — with `node:fs` callbacks and nothing else: no lease, no checks, no retries, no
 *   recovery. What a locker built on these calls cannot go below; written for this benchmark only.
 */
import { createHash } from "node:crypto";
import { mkdir, mkdirSync, rename, rmdir } from "node:fs";
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

/** `call(...args)` through the thread pool, as a promise (one per call, as FileLocker's calls). */
const pooled = (call, ...args) =>
  new Promise((resolve, reject) => call(...args, (error) => (error ? reject(error) : resolve())));
const ignore = () => undefined;

/** The raw floor of FileLocker's calls (see the top of this file). */
const rawRename = {
  id: "raw-rename",
  label: "raw floor: FileLocker's 4 calls through the thread pool, nothing else",
  open(directory) {
    const hashes = new Map();
    let sequence = 0;
    // An entry name as long as a FileLocker's (token, deadlines, pid, start time, boot id, host…).
    const filler = "x".repeat(96);
    let spare = join(directory, `raw.tmp-${sequence}`);
    mkdirSync(spare);
    return {
      async lock(key) {
        let hash = hashes.get(key);
        if (hash === undefined) {
          hash = createHash("sha256").update(key).digest("hex");
          hashes.set(key, hash);
        }
        const lock = join(directory, `${hash}.lock`);
        const entry = `${(sequence++).toString(36)}.${filler}`;
        await pooled(mkdir, join(spare, entry));
        await pooled(rename, spare, lock);
        return async () => {
          const next = join(directory, `${hash}.tmp-${sequence.toString(36)}`);
          await pooled(rename, join(lock, entry), next);
          spare = next;
          rmdir(lock, ignore);
        };
      },
      close: async () => undefined,
    };
  },
};

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
  "raw-rename": rawRename,
  "proper-lockfile": properLockfile("proper-lockfile", "proper-lockfile (one attempt)", 0),
  "proper-lockfile-1ms": properLockfile("proper-lockfile-1ms", "proper-lockfile, polling every 1 ms", poll(1)),
  "proper-lockfile-25ms": properLockfile("proper-lockfile-25ms", "proper-lockfile, polling every 25 ms", poll(25)),
};
