import { LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkFiles } from "../deployment/files.js";
import { abortable } from "../internal/abortable.js";
import type { AcquireCall } from "../internal/traced-locker.js";
import { validateKey } from "../internal/validate.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { hashKey, LockDirectory } from "./directory.js";
import { fileBackend } from "./file-backend.js";
import { type FileLockerOptions, type ResolvedFileLockerOptions, resolveFileOptions } from "./options.js";
import type { FileStoreStats } from "./store.js";

/**
 * A {@link Locker} across the processes of one host, with no server: each lock is a small
 * directory entry in a shared lock directory (by default a private per-user folder under the OS
 * temporary directory). Same contract as every Locker — leases, fencing tokens, `autoExtend: false`,
 * per-acquisition `expiry` — for two cron jobs, workers or CLI invocations on one machine.
 *
 * How it works (see the `store` module for the file layout):
 *
 * - **Atomic take.** An attempt makes its entry (random token, deadline, grant time, and who holds
 *   it: pid, process start time, pid namespace, boot id, host and the locker's `owner`, all in the
 *   entry's name; `inspect` reads them back) in a
 *   private directory and renames that directory onto the key's lock directory: the rename succeeds
 *   only if the lock is free, and the lock never exists without its entry.
 * - **Leases.** Every held lock is extended every `expiry / 2` from its own deadline, by renaming
 *   its entry to a later deadline — which succeeds only while the entry is still there, so an
 *   extension never revives a lock that was taken over. A lock found lost aborts its lease's `lost`
 *   signal and calls `onLockLost`; its holder keeps running.
 * - **Deadlines on the monotonic clock.** An entry's deadline is kept on the boot's
 *   `CLOCK_MONOTONIC` (`process.hrtime`), which every process of the host shares and which wall-clock
 *   steps (NTP, `date -s`) do not move; the boot id tells boots apart. A holder or waiter whose wall
 *   clock steps by an hour neither gives a live lock away nor keeps a dead one for the hour.
 * - **Dead holders** of this host are taken over at once, without waiting for their deadline, as
 *   with `flock`: a holder whose process is gone (`kill(pid, 0)` says `ESRCH`, or it is a zombie),
 *   whose pid now runs another process (its start time in `/proc/PID/stat` differs from the
 *   entry's), or that wrote its entry in an earlier boot of this host. A holder that led its
 *   process group (a program started from an interactive shell) is dead only once no process is
 *   left in that group: children it started may still act under its lock. A waiter finds out at its
 *   next look, within `backoff.max`. A pid of another host, pid namespace (container) or unknown
 *   boot is never trusted: such a holder is taken over only after its deadline.
 * - **Stopped holders.** A lock whose deadline passed (a holder frozen by `SIGSTOP`, a debugger, a
 *   blocked event loop) is taken over by removing its entry (by name: of several contenders racing
 *   for it exactly one succeeds) and taking it anew.
 * - **Bursts.** The store operations of one locker in flight (each a few file-system calls in a
 *   row) are bounded (4; libuv's thread pool, which every file-system call of the process shares,
 *   has 4 threads by default), and extensions,
 *   releases and fencing go before waiting attempts: 10,000 concurrent attempts on a key do not
 *   starve the held leases. Concurrent one-shot attempts on one key look at the lock before
 *   building an attempt of their own.
 * - **Waiting.** Waiters queue in arrival order across processes: a locker whose attempt missed
 *   takes a ticket in the key's queue directory (`H.q`), and only the first in line tries when the
 *   lock is released, heard through `fs.watch` on the directory; each of the others waits, watching
 *   the queue, for the ticket ahead of its own to go. A jittered backoff (never later than the
 *   holder's deadline) is the safety net. A ticket whose process died is dropped at the next look;
 *   one that is not refreshed (its process frozen) lapses after `3 × backoff.max + 1 s`. A locker's
 *   first try on a key it has not seen contended does not read the queue (the uncontended path
 *   costs nothing more), so it may come before queued waiters, once. Waiters of one locker queue
 *   FIFO and only the first one tries (the lock core's wait loop; this class is a thin one over
 *   the core and its `fileBackend`; the queue is in `lock-queue.ts`).
 * - **Fencing.** A per-key counter, moved up by a rename that only succeeds from its current value,
 *   while the lock is held; the grant is confirmed afterwards, so a token is issued only to a holder.
 * - **Keys** of any content (slashes, `..`, NUL, up to the 1,024-byte limit) are hashed (SHA-256)
 *   into file names: nothing is ever created outside the directory.
 *
 * Scope: processes of one host sharing a local file system (POSIX rename semantics; network file
 * systems are not supported). The monotonic deadlines and the dead-holder check need Linux's `/proc`
 * (the boot id and process start times). Elsewhere (macOS, Windows), and for an entry written under
 * another boot id, deadlines fall back to wall-clock times compared by every process — a clock
 * stepped by more than a lease can then let a waiter take a live lock early, or keep a dead
 * holder's lock longer — and a dead holder's lock is taken over only after its deadline.
 * Containers of one kernel share the boot and its monotonic clock, unless one has its own time
 * namespace (then it needs a lock directory of its own).
 * `close()` stops extending; held locks are not deleted and expire (or are taken over at once when
 * the process then exits).
 *
 * Diagnostics (kind `"file-lock"`; see `diagnostics.ts`): every call is traced on
 * `globallock:acquire` (`attempts`: takes tried in the directory); every release, extension and
 * lost lease is published (extensions as the lease keeper batches them).
 */
export class FileLocker extends CoreLocker<ResolvedFileLockerOptions> {
  readonly #directory: LockDirectory;
  readonly #core: LockCore<ResolvedFileLockerOptions>;

  /** @param options see {@link FileLockerOptions}. */
  constructor(options?: FileLockerOptions) {
    const resolved = resolveFileOptions(options);
    const directory = new LockDirectory(resolved);
    const core = new LockCore(resolved, fileBackend(directory, resolved));
    super(core, "file-lock");
    attachDeploymentCheck([this], () => checkFiles(resolved.directory));
    this.#core = core;
    this.#directory = directory;
  }

  /** The lock directory (absolute). */
  get directory(): string {
    return this.options.directory;
  }

  /** The default lease length in ms. */
  get expiry(): number {
    return this.options.expiry;
  }

  /** Stale locks this locker took over, and races for one it lost to another contender. */
  get stats(): Readonly<FileStoreStats> {
    return { ...this.#directory.store.stats };
  }

  /**
   * The path of `key`'s lock (a directory holding the holder's entry while held) — for tools and
   * tests; deleting it behind a holder's back makes its next extension report the lock lost.
   */
  lockPath(key: string): string {
    validateKey(key);
    return this.#directory.store.lockPath(hashKey(key));
  }

  /**
   * Until the lock directory is made (see {@link ready}).
   * @internal
   */
  protected override get unready(): boolean {
    return !this.#directory.prepared;
  }

  /**
   * Creates the lock directory before a call's first attempt (once; a directory that cannot be
   * made fails the call with no attempt made), after the call is validated as the core would
   * (synchronously, so a traced call's weight is known at its end).
   * @internal
   */
  protected override ready([signal, key, options, probe]: AcquireCall): Promise<void> {
    try {
      const resolved = this.#core.resolveRequest(options);
      this.request(resolved);
      if (probe !== undefined) probe.weight = resolved.weight;
      this.#core.checkCall(signal, key);
    } catch (error) {
      return Promise.reject(error);
    }
    return abortable(this.#directory.prepare(), [signal]);
  }
}
