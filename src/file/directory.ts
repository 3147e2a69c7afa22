/**
 * The lock directory of a file locker: created and checked once before first use (again if it
 * was removed meanwhile), with the {@link FileStore} of its lock files.
 */
import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { access, chmod, lstat, mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { StoreUnavailableError } from "../errors.js";
import { CallPolicy, inMemoryFileSystem } from "./call-policy.js";
import { codeOf } from "./fs-errors.js";
import type { ResolvedFileLockerOptions } from "./options.js";
import { ownerField, writeOwnerFile } from "./owner.js";
import { FileStore } from "./store.js";

/** Attempt directories older than this are left over by a killed process, and are removed. */
const STALE_ATTEMPT_MS = 60_000;

/** The file name stem of a key: SHA-256 of its UTF-16 code units (so every string maps apart), hex. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf16le").digest("hex");
}

/**
 * The hashes of a backend's keys: `mark(key)` hashed (a semaphore's or a read-write key's marked so
 * that their files never meet a lock's), with the last one kept, so that a key used again and
 * again is hashed once.
 */
export class KeyHashes {
  /** How a key is marked before it is hashed (a semaphore's or a read-write key's apart from a lock's). */
  readonly mark: (key: string) => string;
  #lastKey: string | undefined;
  #lastHash = "";

  constructor(mark: (key: string) => string) {
    this.mark = mark;
  }

  /** The file name stem of `key`. */
  of(key: string): string {
    if (key === this.#lastKey) return this.#lastHash;
    const hash = hashKey(this.mark(key));
    this.#lastKey = key;
    this.#lastHash = hash;
    return hash;
  }
}

/** The lock directory of a file locker and its lock files (see the module comment). */
export class LockDirectory {
  readonly store: FileStore;
  readonly #options: ResolvedFileLockerOptions;
  #ready: Promise<void> | undefined;
  /** The directory is ready (no need to wait for {@link prepare} again). */
  #prepared = false;

  constructor(options: ResolvedFileLockerOptions) {
    this.#options = options;
    this.store = new FileStore(options.directory, ownerField(options.owner), new CallPolicy(options.syncCalls));
  }

  /** Whether the directory is ready (no need to wait for {@link prepare}). */
  get prepared(): boolean {
    return this.#prepared;
  }

  /**
   * Creates (and, for the default directory, checks) the lock directory, once; writes the owner
   * file an owner too long for an entry's name needs (see `owner.ts`).
   */
  prepare(): Promise<void> {
    if (this.#prepared) return Promise.resolve();
    const { directory, owner, syncCalls } = this.#options;
    this.#ready ??= prepareDirectory(this.#options, () => writeOwnerFile(directory, owner, this.store.ownerField))
      .then(async (shareMode) => [shareMode, syncCalls === "auto" && (await inMemoryFileSystem(directory))] as const)
      .then(
        ([shareMode, inMemory]) => {
          this.store.shareMode = shareMode;
          this.store.calls.inMemory = inMemory;
          this.#prepared = true;
          void this.store.sweepAttempts(STALE_ATTEMPT_MS);
        },
        (error: unknown) => {
          this.#ready = undefined; // a later call tries again
          throw error;
        },
      );
    return this.#ready;
  }

  /**
   * Runs `operation` once the directory is ready; if it fails because the directory was removed
   * after it was prepared (a temporary-files cleaner, say), prepares it again and runs it once more.
   */
  use<T>(operation: () => Promise<T>): Promise<T> {
    // Prepared (nearly always): no wait for `prepare` first.
    const attempt = this.#prepared ? operation() : this.prepare().then(operation);
    return attempt.catch(async (error: unknown) => {
      if (!(error instanceof StoreUnavailableError) || codeOf(error.cause) !== "ENOENT") throw error;
      this.#ready = undefined;
      this.#prepared = false;
      await this.prepare();
      return operation();
    });
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

/**
 * Creates the lock directory (mode 0700), then runs `finish` in it. The default directory lives in
 * a shared temporary folder, so it must be a real directory (not a symbolic link) owned by this
 * user; group and others lose any access they had. Any failure is a {@link StoreUnavailableError}
 * with its cause. Resolves to the {@link FileStore.shareMode} of a directory that its group or
 * others may write (several users share it, e.g. mode 2775): its permission bits and setgid,
 * owner's rwx added.
 */
async function prepareDirectory(
  { directory, defaultDirectory }: ResolvedFileLockerOptions,
  finish: () => Promise<void>,
): Promise<number | undefined> {
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
    await finish();
  } catch (error) {
    throw fail(`is not writable (${codeOf(error)})`, error);
  }
  if (defaultDirectory) return undefined;
  const { mode } = await stat(directory).catch((error: unknown) => {
    throw fail(`cannot be read (${codeOf(error)})`, error);
  });
  // 0o2000: setgid (new entries take the directory's group).
  return (mode & 0o022) === 0 ? undefined : 0o700 | (mode & 0o2077);
}
