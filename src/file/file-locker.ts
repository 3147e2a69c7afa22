import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { access, chmod, lstat, mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { LockerClosedError, StoreUnavailableError } from "../errors.js";
import { abortable } from "../internal/abortable.js";
import { Backoff } from "../internal/backoff.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import { noopRelease } from "../internal/release-func.js";
import { newToken } from "../internal/token.js";
import { TracedLocker } from "../internal/traced-locker.js";
import {
  checkWeight,
  type ResolvedAcquireOptions,
  resolveAcquireOptions,
  validateKey,
  validateSignal,
  validateTimerDelay,
} from "../internal/validate.js";
import { KeyStates, Waiter } from "../internal/waiter.js";
import type { AcquireOptions, Lease, Locker, ReleaseFunc } from "../locker.js";
import { MIN_EXPIRY_MS } from "../redis/options.js";
import { remainingMs } from "./entry.js";
import { FileHold, type HoldOwner } from "./file-hold.js";
import { type FileLockerOptions, type ResolvedFileLockerOptions, resolveFileOptions } from "./options.js";
import { codeOf, type Entry, type FileLockHolder, FileStore, type FileStoreStats } from "./store.js";
import { DirectoryWatcher } from "./watcher.js";

/** Attempt directories older than this are left over by a killed process, and are removed. */
const STALE_ATTEMPT_MS = 60_000;

/** What an attempt that did not take the lock saw: the holder's entry, if it could read one. */
interface Missed {
  readonly holder: Entry | undefined;
}

/**
 * A {@link Locker} across the processes of one host, with no server: each lock is a small
 * directory entry in a shared lock directory (by default a private per-user folder under the OS
 * temporary directory). Same contract as every Locker — leases, fencing tokens, `autoExtend: false`,
 * per-acquisition `expiry` — for two cron jobs, workers or CLI invocations on one machine.
 *
 * How it works (see the `store` module for the file layout):
 *
 * - **Atomic take.** An attempt makes its entry (random token, deadline, grant time, and who holds
 *   it: pid, process start time, pid namespace, boot id and host, all in the entry's name) in a
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
 * - **Waiting.** Waiters wake on release through `fs.watch` on the directory, with a jittered
 *   backoff (never later than the holder's deadline) as the safety net; waiters of one locker queue
 *   FIFO and only the first one tries.
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
 * lost lease is published, each hold being extended on its own (one extend message per hold).
 */
export class FileLocker extends TracedLocker implements Locker {
  readonly #options: ResolvedFileLockerOptions;
  readonly #store: FileStore;
  readonly #watcher: DirectoryWatcher;
  readonly #keys = new KeyStates();
  readonly #holds = new Set<FileHold>();
  /** One-shot attempts under way, by key. */
  readonly #attempting = new Map<string, number>();
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #closing = new AbortController();
  #ready: Promise<void> | undefined;
  /** The directory is ready (no need to wait for {@link #prepare} again). */
  #prepared = false;
  #waiting = 0;
  #keepAlive: NodeJS.Timeout | undefined;
  readonly #owner: HoldOwner;

  /** @param options see {@link FileLockerOptions}. */
  constructor(options?: FileLockerOptions) {
    super("file-lock");
    this.#options = resolveFileOptions(options);
    this.#store = new FileStore(this.#options.directory);
    this.#watcher = new DirectoryWatcher(this.#options.directory);
    this.#owner = {
      store: this.#store,
      onLockLost: this.#options.onLockLost,
      ended: (hold) => this.#ended(hold),
      freed: (key) => this.#keys.notifyHead(key),
      track: (operation) => this.#track(operation),
      diagnostics: this.diagnostics,
    };
  }

  /** The lock directory (absolute). */
  get directory(): string {
    return this.#options.directory;
  }

  /** The default lease length in ms. */
  get expiry(): number {
    return this.#options.expiry;
  }

  /** Number of leases this locker holds now. */
  get heldCount(): number {
    return this.#holds.size;
  }

  /** Number of callers waiting in `lock` or `acquire` on this locker. */
  get waitingCount(): number {
    return this.#waiting;
  }

  /** Stale locks this locker took over, and races for one it lost to another contender. */
  get stats(): Readonly<FileStoreStats> {
    return { ...this.#store.stats };
  }

  // The calls themselves (see TracedLocker); `probe` is the diagnostics message while traced.

  /** @internal */
  protected override async lockCall(
    signal: AbortSignal | undefined,
    key: string,
    probe: AcquireProbe | undefined,
  ): Promise<ReleaseFunc> {
    const request = this.#check(signal, key, undefined, undefined);
    return (await this.#obtain(signal, key, request, probe)).release;
  }

  /** @internal */
  protected override async tryLockCall(
    signal: AbortSignal | undefined,
    key: string,
    probe: AcquireProbe | undefined,
  ): Promise<[acquired: boolean, release: ReleaseFunc]> {
    const request = this.#check(signal, key, undefined, undefined);
    const hold = await this.#tryObtain(signal, key, request, probe);
    return hold === undefined ? [false, noopRelease()] : [true, hold.release];
  }

  /** @internal */
  protected async acquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease> {
    const request = this.#check(signal, key, options, probe);
    return (await this.#obtain(signal, key, request, probe)).lease();
  }

  /** @internal */
  protected async tryAcquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease | undefined> {
    const request = this.#check(signal, key, options, probe);
    return (await this.#tryObtain(signal, key, request, probe))?.lease();
  }

  /**
   * Who holds `key` now, read from its lock file: pid, host, grant time and deadline (`stale` when
   * the deadline passed and the next caller will take it over), or `undefined` when it is free.
   */
  async inspect(key: string): Promise<FileLockHolder | undefined> {
    validateKey(key);
    this.#refuseIfClosed();
    await this.#prepare();
    return this.#store.holder(hashKey(key));
  }

  /**
   * The path of `key`'s lock (a directory holding the holder's entry while held) — for tools and
   * tests; deleting it behind a holder's back makes its next extension report the lock lost.
   */
  lockPath(key: string): string {
    validateKey(key);
    return this.#store.lockPath(hashKey(key));
  }

  /** {@inheritDoc Locker.close} */
  override async close(): Promise<void> {
    if (!this.#closing.signal.aborted) {
      this.#closing.abort(new LockerClosedError());
      this.#watcher.close();
      for (const hold of this.#holds) hold.stop();
    }
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /**
   * Validates a call; resolves its options (and tells `probe` the weight asked for). Throws before
   * anything is done.
   */
  #check(
    signal: unknown,
    key: unknown,
    options: unknown,
    probe: AcquireProbe | undefined,
  ): ResolvedAcquireOptions & { expiry: number } {
    validateSignal(signal);
    validateKey(key);
    const resolved = resolveAcquireOptions(options);
    checkWeight(resolved.weight, 1, "a lock's limit is 1");
    if (probe !== undefined) probe.weight = resolved.weight;
    if (resolved.expiry !== undefined) validateTimerDelay("options.expiry", resolved.expiry, MIN_EXPIRY_MS);
    this.#refuseIfClosed();
    signal?.throwIfAborted();
    return { ...resolved, expiry: resolved.expiry ?? this.#options.expiry };
  }

  #refuseIfClosed(): void {
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
  }

  /** One attempt, unless this locker holds the key or has callers queued for it (they come first). */
  async #tryObtain(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions & { expiry: number },
    diagnosed: AcquireProbe | undefined,
  ): Promise<FileHold | undefined> {
    if (!this.#prepared) await this.#race(this.#prepare(), signal);
    const state = this.#keys.get(key);
    if (state !== undefined && !state.idle && (state.held > 0 || state.waiters.size > 0)) return undefined;
    // Another attempt of this locker on the key is under way (a burst): look before building one.
    const concurrent = this.#attempting.get(key) ?? 0;
    this.#attempting.set(key, concurrent + 1);
    try {
      const outcome = await this.#race(this.#attempt(key, request, concurrent > 0, diagnosed), signal, true);
      return outcome instanceof FileHold ? outcome : undefined;
    } finally {
      const left = (this.#attempting.get(key) ?? 1) - 1;
      if (left === 0) this.#attempting.delete(key);
      else this.#attempting.set(key, left);
    }
  }

  /**
   * Waits until `key` is held: queued FIFO behind this locker's earlier callers; the first in line
   * tries, then watches the directory and tries again on every event about the key, at the latest
   * after a jittered backoff or at the holder's deadline, whichever is first.
   */
  async #obtain(
    signal: AbortSignal | undefined,
    key: string,
    request: ResolvedAcquireOptions & { expiry: number },
    diagnosed: AcquireProbe | undefined,
  ): Promise<FileHold> {
    if (!this.#prepared) await this.#race(this.#prepare(), signal);
    const state = this.#keys.open(key);
    const waiter = new Waiter();
    state.waiters.push(waiter);
    let unwatch: (() => void) | undefined;
    let backoff: Backoff | undefined;
    /**
     * Look before building an attempt (one read instead of three calls and a clean-up): on every
     * attempt after the first, since a release wakes every process waiting for the key and all but
     * one of them find it taken again; and on the first one of a caller queued behind another here.
     */
    let probe = state.waiters.head !== waiter;
    const signals = [signal, this.#closing.signal];
    let acquired = false;
    try {
      for (;;) {
        let timeout: number | undefined;
        if (state.waiters.head === waiter) {
          const outcome = await this.#race(this.#attempt(key, request, probe, diagnosed), signal, true);
          if (outcome instanceof FileHold) {
            acquired = true;
            return outcome;
          }
          probe = true;
          if (unwatch === undefined) {
            // Watch first, then look again: a release between the two is not missed.
            unwatch = this.#watcher.subscribe(`${hashKey(key)}.lock`, () => waiter.notify());
            continue;
          }
          backoff ??= new Backoff(this.#options.backoffMin, this.#options.backoffMax);
          timeout = backoff.next();
          // A holder that stops is taken over at its deadline, not a backoff later (one that dies is
          // found dead at the next look: within a backoff).
          if (outcome.holder !== undefined) {
            timeout = Math.min(timeout, Math.max(1, remainingMs(outcome.holder) + 2));
          }
        }
        this.#enterWait();
        try {
          await waiter.wait(timeout, signals);
        } finally {
          this.#leaveWait();
        }
      }
    } finally {
      unwatch?.();
      // The next in line starts its turn (a look at the lock first, which this caller may hold now).
      this.#keys.leave(key, state, waiter, !acquired);
      if (acquired) state.waiters.head?.postpone();
    }
  }

  /**
   * Settles like `operation` unless `signal` aborts or the locker closes first; a hold that the
   * abandoned operation still obtains is released (`holds`: the operation may resolve to one).
   */
  #race<T>(operation: Promise<T>, signal: AbortSignal | undefined, holds = false): Promise<T> {
    const raced = abortable(operation, [signal, this.#closing.signal]);
    if (holds) {
      raced.catch(() => {
        // The caller never got it: released without a release message (as Redis does).
        void operation.then((result) => (result instanceof FileHold ? result.abandon() : undefined));
      });
    }
    return raced;
  }

  /**
   * One attempt to take `key` (fencing included); a hold, or what the attempt saw. `probe`: look
   * first; `diagnosed`: the diagnostics message of a traced call, which counts the attempt.
   */
  #attempt(
    key: string,
    request: ResolvedAcquireOptions & { expiry: number },
    probe: boolean,
    diagnosed: AcquireProbe | undefined,
  ): Promise<FileHold | Missed> {
    if (diagnosed !== undefined) diagnosed.attempts += 1;
    return this.#track(this.#take(key, request, probe));
  }

  async #take(
    key: string,
    request: ResolvedAcquireOptions & { expiry: number },
    probe: boolean,
  ): Promise<FileHold | Missed> {
    const hash = hashKey(key);
    const { expiry } = request;
    const result = await this.#store.take(hash, newToken(), expiry, probe).catch(async (error: unknown) => {
      // The directory was removed after it was prepared (a temporary-files cleaner, say): prepare
      // it again, with its checks, and try once more.
      if (!(error instanceof StoreUnavailableError) || codeOf(error.cause) !== "ENOENT") throw error;
      this.#ready = undefined;
      this.#prepared = false;
      await this.#prepare();
      return this.#store.take(hash, newToken(), expiry, probe);
    });
    if (!result.taken) return { holder: result.holder };
    let { entry, startedAt } = result;
    let fencingToken: bigint | undefined;
    if (request.fencing) {
      try {
        fencingToken = await this.#store.nextFencingToken(hash);
        // Confirm the grant after the token: a holder that lost the lock meanwhile gets no token.
        const confirmedAt = performance.now();
        const confirmed = await this.#store.extend(hash, entry, expiry);
        if (confirmed === undefined) return { holder: undefined };
        entry = confirmed;
        startedAt = confirmedAt;
      } catch (error) {
        await this.#store.release(hash, entry).catch(() => undefined);
        throw error;
      }
    }
    const hold = new FileHold(this.#owner, key, hash, entry, startedAt, expiry, request.autoExtend, fencingToken);
    this.#holds.add(hold);
    const state = this.#keys.open(key);
    state.held += 1;
    if (this.#closing.signal.aborted) hold.stop();
    return hold;
  }

  /**
   * Counts a waiting caller. While anyone waits, one ref'ed timer keeps the process alive: the
   * watcher and the backoff timers do not (they must not hold up an idle process), but a caller
   * waiting for a lock held by another process is work in progress, like a pending request.
   */
  #enterWait(): void {
    this.#waiting += 1;
    this.#keepAlive ??= setInterval(() => undefined, 1 << 30);
  }

  #leaveWait(): void {
    this.#waiting -= 1;
    if (this.#waiting > 0 || this.#keepAlive === undefined) return;
    clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
  }

  #ended(hold: FileHold): void {
    if (!this.#holds.delete(hold)) return;
    const state = this.#keys.get(hold.key);
    if (state === undefined) return;
    state.held -= 1;
    this.#keys.tidy(hold.key, state);
  }

  /** Registers an operation in flight until it settles (`close()` waits for them). */
  #track<T>(operation: Promise<T>): Promise<T> {
    this.#inFlight.add(operation);
    const forget = (): void => {
      this.#inFlight.delete(operation);
    };
    operation.then(forget, forget);
    return operation;
  }

  /** Creates (and, for the default directory, checks) the lock directory, once. */
  #prepare(): Promise<void> {
    this.#ready ??= this.#track(prepareDirectory(this.#options)).then(
      () => {
        this.#prepared = true;
        void this.#track(this.#store.sweepAttempts(STALE_ATTEMPT_MS));
      },
      (error: unknown) => {
        this.#ready = undefined; // a later call tries again
        throw error;
      },
    );
    return this.#ready;
  }
}

/**
 * `mkdir` with mode 0700, creating up to `parents` missing parent directories first; an existing
 * directory is fine. (Not `mkdir({ recursive: true })`: on Node.js 20 it never settles for some
 * paths that cannot be created, such as one under `/proc`.)
 */
async function makeDirectory(path: string, parents: number): Promise<void> {
  try {
    await mkdir(path, { mode: 0o700 });
  } catch (error) {
    if (codeOf(error) === "EEXIST") return;
    const parent = dirname(path);
    if (codeOf(error) !== "ENOENT" || parents === 0 || parent === path) throw error;
    await makeDirectory(parent, parents - 1);
    await mkdir(path, { mode: 0o700 }).catch((again: unknown) => {
      if (codeOf(again) !== "EEXIST") throw again;
    });
  }
}

/** The file name stem of a key: SHA-256 of its UTF-16 code units (so every string maps apart), hex. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf16le").digest("hex");
}

/**
 * Creates the lock directory (mode 0700). The default directory lives in a shared temporary
 * folder, so it must be a real directory (not a symbolic link) owned by this user; group and
 * others lose any access they had. Any failure is a {@link StoreUnavailableError} with its cause.
 */
async function prepareDirectory({ directory, defaultDirectory }: ResolvedFileLockerOptions): Promise<void> {
  const fail = (problem: string, cause?: unknown): StoreUnavailableError =>
    new StoreUnavailableError(directory, `The lock directory ${directory} ${problem}`, { cause });
  try {
    await makeDirectory(directory, defaultDirectory ? 0 : 32);
  } catch (error) {
    throw fail(`cannot be created (${codeOf(error) ?? String(error)})`, error);
  }
  if (defaultDirectory) {
    const info = await lstat(directory).catch((error: unknown) => {
      throw fail(`cannot be read (${codeOf(error)})`, error);
    });
    if (!info.isDirectory()) throw fail("is not a directory (a symbolic link or a file is not trusted)");
    const uid = process.getuid?.();
    if (uid !== undefined && info.uid !== uid) throw fail(`belongs to another user (uid ${info.uid})`);
    if ((info.mode & 0o077) !== 0) await chmod(directory, 0o700).catch(() => undefined);
  }
  try {
    await access(directory, constants.W_OK | constants.X_OK);
  } catch (error) {
    throw fail(`is not writable (${codeOf(error)})`, error);
  }
}
