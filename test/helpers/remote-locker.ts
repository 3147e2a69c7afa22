/**
 * A {@link Locker} whose calls run in a child process: the contract suites' "peer" really is
 * another process. Two kinds of child speak the same protocol (see remote-child.ts):
 *
 * - {@link RemoteLocker.ofBundle}: a child entry bundled from the sources by {@link bundleChild} (no
 *   build of the package needed) that serves its store's locker with remote-child.ts — the
 *   semaphores of files, PostgreSQL and MySQL;
 * - {@link RemoteFileLocker.start}: file-peer-child.mjs, a FileLocker (or a view of a
 *   FileReadWriteLocker) on the BUILT package, optionally as another user or under a clock wrapper,
 *   with a few requests of its own (`raceAt`, `clock`).
 *
 * Waits are aborted in the child when the caller's signal aborts (the call rejects with
 * `signal.reason`, as the contract wants); a lease's `lost` signal follows the child's;
 * `assertHeld` knows what the parent saw (lost, released), not the child's deadline.
 */
import { type ChildProcess, fork, type SpawnOptions } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { build } from "esbuild";
import {
  type AcquireOptions,
  type FileLockerOptions,
  type Lease,
  type Locker,
  LockLostError,
  type LockLostReason,
  type ReleaseFunc,
  type ReleaseOutcome,
} from "../../src/index.js";
import type { AdoptOptions, HolderInfo, LockInfo } from "../../src/locker.js";

const FILE_PEER_CHILD = resolve(import.meta.dirname, "file-peer-child.mjs");

/** Where bundled children go: inside the repository's node_modules, so that packages resolve. */
const BUNDLES = resolve(import.meta.dirname, "../../node_modules/.cache/globallock-test-children");

interface Reply {
  id?: number;
  ok?: boolean;
  event?: string;
  reason?: LockLostReason;
  lease?: { fencingToken?: string; key?: string } | null;
  outcome?: ReleaseOutcome;
  error?: { name?: string; code?: string; message: string };
  won?: boolean;
  lostRace?: boolean;
  pid?: number;
  now?: number;
  waiting?: number;
  handle?: string;
  info?: { key: string; waiting: number; holders: Array<Omit<HolderInfo, "fencingToken"> & { fencingToken?: string }> };
}

/**
 * Bundles the child entry `entry` (a .ts file that calls remote-child.ts's `serve`) into one ES
 * module; resolves to its path and a function that removes it.
 */
export async function bundleChild(entry: string): Promise<{ path: string; remove(): void }> {
  mkdirSync(BUNDLES, { recursive: true });
  const path = join(BUNDLES, `${basename(entry, ".ts")}-${process.pid}-${Date.now()}.mjs`);
  await build({
    entryPoints: [entry],
    outfile: path,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    logLevel: "warning",
  });
  return { path, remove: () => rmSync(path, { force: true }) };
}

/** An error the child reported, with its name and code. */
export class RemoteError extends Error {
  readonly code: string | undefined;
  constructor(error: { name?: string; code?: string; message: string }) {
    super(error.message);
    this.name = error.name ?? "RemoteError";
    this.code = error.code;
  }
}

/** How the child is started: as another user, through a wrapper such as `setpriv`, or with another environment. */
export type RemoteSpawnOptions = Pick<SpawnOptions, "uid" | "gid" | "env"> & { execPath?: string; execArgv?: string[] };

/** A locker in a child process (see the module comment). */
export class RemoteLocker implements Locker {
  readonly child: ChildProcess;
  #nextId = 1;
  readonly #replies = new Map<number, (reply: Reply) => void>();
  readonly #lost = new Map<number, AbortController>();
  /** The child's exit. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  protected constructor(script: string, spawnOptions: RemoteSpawnOptions = {}) {
    this.child = fork(script, [], { stdio: ["ignore", "inherit", "inherit", "ipc"], ...spawnOptions });
    this.exited = new Promise((done) => this.child.once("exit", (code, signal) => done({ code, signal })));
    this.child.on("message", (message: Reply) => this.#onMessage(message));
  }

  /** Starts a child of `bundle` (see {@link bundleChild}) and opens its locker with `options`. */
  static async ofBundle(bundle: string, options: unknown): Promise<RemoteLocker> {
    const remote = new RemoteLocker(bundle);
    await remote.open({ options });
    return remote;
  }

  /**
   * Waits for the child to be ready (a child that cannot start, say one that may not read the
   * package, fails the start rather than hang it), then opens its locker with `request`.
   */
  protected async open(request: Record<string, unknown>): Promise<void> {
    await new Promise<void>((done, fail) => {
      const onReady = (message: Reply): void => {
        if (message.event !== "ready") return;
        this.child.off("message", onReady);
        done();
      };
      this.child.on("message", onReady);
      void this.exited.then(({ code, signal }) =>
        fail(new Error(`child exited before it was ready (${code ?? signal})`)),
      );
    });
    const reply = await this.call({ op: "open", ...request });
    if (!reply.ok) {
      this.child.kill("SIGKILL");
      throw new RemoteError(reply.error ?? { message: "open failed" });
    }
  }

  #onMessage(message: Reply): void {
    if (message.event === "lost" && message.id !== undefined) {
      this.#lost.get(message.id)?.abort(new LockLostError("(remote)", message.reason ?? "taken"));
      return;
    }
    if (message.id === undefined) return;
    const done = this.#replies.get(message.id);
    this.#replies.delete(message.id);
    done?.(message);
  }

  /** Sends `message` as request `id` and resolves to the child's reply. */
  protected call(message: Record<string, unknown>, id = this.nextId()): Promise<Reply> {
    if (!this.child.connected) return Promise.resolve({ id, ok: false, error: { message: "the child is gone" } });
    return new Promise((done) => {
      this.#replies.set(id, done);
      this.child.send({ ...message, id });
    });
  }

  /** A fresh request id. */
  protected nextId(): number {
    return this.#nextId++;
  }

  lock(signal: AbortSignal | undefined, key: string): Promise<ReleaseFunc> {
    return this.acquire(signal, key).then((lease) => lease.release);
  }

  async tryLock(signal: AbortSignal | undefined, key: string): Promise<[boolean, ReleaseFunc]> {
    const lease = await this.tryAcquire(signal, key);
    return lease === undefined ? [false, noop()] : [true, lease.release];
  }

  async acquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease> {
    return (await this.#acquire(signal, key, options, true)) as Lease;
  }

  tryAcquire(signal: AbortSignal | undefined, key: string, options?: AcquireOptions): Promise<Lease | undefined> {
    return this.#acquire(signal, key, options, false);
  }

  async #acquire(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    wait: boolean,
  ): Promise<Lease | undefined> {
    signal?.throwIfAborted();
    const id = this.nextId();
    const replied = this.call({ op: "acquire", key, options, wait }, id);
    let aborted: (reason: unknown) => void = () => undefined;
    const onAbort = (): void => {
      // A child that is gone (killed by a test) has nothing to abort.
      if (this.child.connected) this.child.send({ op: "abort", id });
      aborted(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const reply = await Promise.race([
        replied,
        new Promise<never>((_, reject) => {
          aborted = reject;
        }),
      ]);
      if (!reply.ok) throw new RemoteError(reply.error ?? { message: "failed" });
      return reply.lease ? this.#lease(id, key, reply.lease.fencingToken) : undefined;
    } catch (error) {
      // Acquired after all (the abort came too late): give it back.
      void replied.then((reply) => (reply.lease ? this.call({ op: "release" }, id) : undefined));
      throw error;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Adopts a handed-off lease in the child (see `Locker.adopt`); its errors as {@link RemoteError}s. */
  async adopt(signal: AbortSignal | undefined, handle: string, options?: AdoptOptions): Promise<Lease> {
    signal?.throwIfAborted();
    const id = this.nextId();
    const reply = await this.call({ op: "adopt", handle, options }, id);
    if (!reply.ok || !reply.lease) {
      // A handle that no longer matches is the contract's LockLostError, wherever it was adopted.
      if (reply.error?.code === "ERR_GLOBALLOCK_LOCK_LOST") throw new LockLostError("(remote)", "taken");
      throw new RemoteError(reply.error ?? { message: "failed" });
    }
    return this.#lease(id, reply.lease.key as string, reply.lease.fencingToken);
  }

  /** The child locker's `inspect` of `key`. */
  async inspect(signal: AbortSignal | undefined, key: string): Promise<LockInfo> {
    signal?.throwIfAborted();
    const reply = await this.call({ op: "inspect", key });
    if (!reply.ok || reply.info === undefined) throw new RemoteError(reply.error ?? { message: "failed" });
    const holders = reply.info.holders.map(({ fencingToken, ...holder }) =>
      fencingToken === undefined ? holder : { ...holder, fencingToken: BigInt(fencingToken) },
    );
    return { ...reply.info, holders };
  }

  list(): Promise<LockInfo[]> {
    return Promise.reject(new Error("RemoteLocker does not forward list"));
  }

  /** The child's `waitingCount`: callers waiting in its locker. */
  async waiting(): Promise<number> {
    const reply = await this.call({ op: "waiting" });
    return reply.waiting ?? Number.NaN;
  }

  #lease(id: number, key: string, fencingToken: string | undefined): Lease {
    const lost = new AbortController();
    this.#lost.set(id, lost);
    let outcome: Promise<ReleaseOutcome> | undefined;
    const releaseWithOutcome = (): Promise<ReleaseOutcome> => {
      outcome ??= this.call({ op: "release" }, id).then((reply) => reply.outcome ?? "unknown");
      return outcome;
    };
    const release = Object.assign(() => releaseWithOutcome().then(() => undefined), {
      [Symbol.asyncDispose]: () => releaseWithOutcome().then(() => undefined),
    });
    return {
      key,
      release,
      lost: lost.signal,
      ...(fencingToken === undefined ? {} : { fencingToken: BigInt(fencingToken) }),
      assertHeld: () => {
        if (lost.signal.aborted) throw lost.signal.reason;
        if (outcome !== undefined) throw new LockLostError(key, "released");
      },
      releaseWithOutcome,
      handOff: async () => {
        const reply = await this.call({ op: "handOff" }, id);
        if (!reply.ok || reply.handle === undefined) throw new RemoteError(reply.error ?? { message: "failed" });
        return reply.handle;
      },
      [Symbol.asyncDispose]: () => release(),
    };
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || !this.child.connected) return;
    await this.call({ op: "close" });
  }

  /** Closes the locker and ends the child. */
  async stop(): Promise<void> {
    await this.close().catch(() => undefined);
    if (this.child.connected) this.child.disconnect();
    await this.exited;
  }

  /** Kills the child at once (SIGKILL): a holder that crashed. Resolves once it is gone. */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }
}

/** A FileLocker in a child process on the built package (file-peer-child.mjs; see the module comment). */
export class RemoteFileLocker extends RemoteLocker {
  /**
   * Starts a child process with a FileLocker of `options` (or, with `view`, that view of a
   * FileReadWriteLocker), optionally as another user.
   */
  static async start(
    options: FileLockerOptions,
    spawnOptions?: RemoteSpawnOptions,
    view?: "read" | "write",
  ): Promise<RemoteFileLocker> {
    const remote = new RemoteFileLocker(FILE_PEER_CHILD, spawnOptions);
    await remote.open({ options, view });
    return remote;
  }

  /**
   * Spins until epoch ms `at`, then one tryAcquire; a lease won is held until `release()`.
   * `lostRace`: this contender found the stale entry but another removed it first.
   */
  async raceAt(key: string, at: number): Promise<{ won: boolean; lostRace: boolean; release(): Promise<unknown> }> {
    const id = this.nextId();
    const reply = await this.call({ op: "raceAt", key, at }, id);
    if (!reply.ok) throw new RemoteError(reply.error ?? { message: "failed" });
    return {
      won: reply.won === true,
      lostRace: reply.lostRace === true,
      release: () => this.call({ op: "release" }, id),
    };
  }

  /** The child's wall clock, `Date.now()` there (stepped by libfaketime in the clock tests). */
  async wallClock(): Promise<number> {
    const reply = await this.call({ op: "clock" });
    return reply.now as number;
  }
}

function noop(): ReleaseFunc {
  const release = async (): Promise<void> => undefined;
  return Object.assign(release, { [Symbol.asyncDispose]: release });
}
