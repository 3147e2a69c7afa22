/**
 * Where a {@link FileStore}'s takes, releases and extensions make their file-system calls: on the
 * event loop or through libuv's thread pool (`FileLockerOptions.syncCalls`; the calls themselves
 * are in `calls.ts`).
 *
 * `"auto"` (the default) calls synchronously only on a file system in memory (Linux `statfs` says
 * tmpfs or ramfs), where a directory operation is a few microseconds of CPU and never waits for a
 * device. On a disk file system a `rename` that replaces or moves a directory now and then waits
 * for the journal: on an idle ext4 disk, locking back to back, about one call in 4,000 took 1–8 ms,
 * and the event loop would wait that long. There, and on every other platform, the calls go
 * through the thread pool.
 */
import { statfs } from "node:fs/promises";
import { type FileCalls, SYNC_CALLS, THREAD_POOL_CALLS } from "./calls.js";

/**
 * Linux `statfs` magic numbers (`f_type`, see statfs(2)) of the file systems in memory, which
 * `"auto"` calls synchronously on.
 */
const MEMORY_FILE_SYSTEMS = new Set([
  0x01021994, // tmpfs (/dev/shm, /run, and /tmp where it is mounted so)
  0x858458f6, // ramfs
]);

/** Whether `type` (a Linux `statfs` `f_type`) is a file system in memory (see {@link MEMORY_FILE_SYSTEMS}). */
export function isMemoryFileSystemType(type: number): boolean {
  return MEMORY_FILE_SYSTEMS.has(type);
}

/**
 * Whether the directory `path` is on a file system in memory: `false` off Linux (other systems
 * number their file systems differently) and when `statfs` fails.
 */
export async function inMemoryFileSystem(path: string): Promise<boolean> {
  if (process.platform !== "linux") return false;
  try {
    return isMemoryFileSystemType((await statfs(path)).type);
  } catch {
    return false;
  }
}

/** A store's choice of calls (see the module comment). */
export class CallPolicy {
  readonly #mode: boolean | "auto";
  /** `"auto"`: the lock directory is on a file system in memory (set once it is prepared). */
  #inMemory = false;

  /** @param mode `FileLockerOptions.syncCalls` */
  constructor(mode: boolean | "auto") {
    this.#mode = mode;
  }

  /** Tells `"auto"` whether the lock directory is on a file system in memory (see {@link inMemoryFileSystem}). */
  set inMemory(inMemory: boolean) {
    this.#inMemory = inMemory;
  }

  /** Whether calls run on the event loop while no operation of the store waits for a slot. */
  get synchronous(): boolean {
    return this.#mode === "auto" ? this.#inMemory : this.#mode;
  }

  /**
   * The calls to make now. `busy`: an operation of the store waits for a slot — then always the
   * thread pool, so that a burst of operations, which start one another as each settles, lets the
   * event loop (and the lease keeper's timers) turn between calls.
   */
  calls(busy: boolean): FileCalls {
    return busy || !this.synchronous ? THREAD_POOL_CALLS : SYNC_CALLS;
  }
}
