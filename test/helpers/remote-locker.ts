/**
 * A {@link Locker} whose locks are taken by a FileLocker in a child process (file-peer-child.mjs,
 * on the built package): the contract's "peer" in another process. Waits are aborted in the child
 * when the caller's signal aborts (the call rejects with `signal.reason`, as the contract wants);
 * a lease's `lost` signal follows the child's; `assertHeld` knows what the parent saw (lost,
 * released), not the child's deadline.
 */
import { type ChildProcess, fork, type SpawnOptions } from "node:child_process";
import { resolve } from "node:path";
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

const CHILD = resolve(import.meta.dirname, "file-peer-child.mjs");

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

export class RemoteFileLocker implements Locker {
  readonly child: ChildProcess;
  #nextId = 1;
  readonly #replies = new Map<number, (reply: Reply) => void>();
  readonly #lost = new Map<number, AbortController>();
  readonly #ready: Promise<void>;
  /** The child's exit. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(
    options: FileLockerOptions,
    spawnOptions: RemoteSpawnOptions = {},
    view: "read" | "write" | undefined = undefined,
  ) {
    this.child = fork(CHILD, [], { stdio: ["ignore", "inherit", "inherit", "ipc"], ...spawnOptions });
    this.exited = new Promise((done) => this.child.once("exit", (code, signal) => done({ code, signal })));
    const ready = new Promise<void>((done, fail) => {
      const onReady = (message: Reply): void => {
        if (message.event !== "ready") return;
        this.child.off("message", onReady);
        done();
      };
      this.child.on("message", onReady);
      // A child that cannot start (say, it may not read the package) fails the start, not hangs it.
      void this.exited.then(({ code, signal }) =>
        fail(new Error(`child exited before it was ready (${code ?? signal})`)),
      );
    });
    this.child.on("message", (message: Reply) => this.#onMessage(message));
    this.#ready = ready.then(async () => {
      await this.#call({ op: "open", options, view });
    });
  }

  /**
   * Starts a child process with a FileLocker of `options` (or, with `view`, that view of a
   * FileReadWriteLocker), optionally as another user.
   */
  static async start(options: FileLockerOptions, spawnOptions?: RemoteSpawnOptions, view?: "read" | "write") {
    const locker = new RemoteFileLocker(options, spawnOptions, view);
    await locker.#ready;
    return locker;
  }

  #onMessage(message: Reply): void {
    if (message.event === "lost" && message.id !== undefined) {
      this.#lost.get(message.id)?.abort(new LockLostError("(remote)", message.reason ?? "taken"));
      return;
    }
    if (message.id === undefined) return;
    const resolveReply = this.#replies.get(message.id);
    this.#replies.delete(message.id);
    resolveReply?.(message);
  }

  #call(message: Record<string, unknown>, id = this.#nextId++): Promise<Reply> {
    return new Promise((done) => {
      this.#replies.set(id, done);
      this.child.send({ ...message, id });
    });
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
    const id = this.#nextId++;
    const replied = this.#call({ op: "acquire", key, options, wait }, id);
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
      void replied.then((reply) => (reply.lease ? this.#call({ op: "release" }, id) : undefined));
      throw error;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Adopts a handed-off lease in the child (see `Locker.adopt`); its errors as {@link RemoteError}s. */
  async adopt(signal: AbortSignal | undefined, handle: string, options?: AdoptOptions): Promise<Lease> {
    signal?.throwIfAborted();
    const id = this.#nextId++;
    const reply = await this.#call({ op: "adopt", handle, options }, id);
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
    const reply = await this.#call({ op: "inspect", key });
    if (!reply.ok || reply.info === undefined) throw new RemoteError(reply.error ?? { message: "failed" });
    const holders = reply.info.holders.map(({ fencingToken, ...holder }) =>
      fencingToken === undefined ? holder : { ...holder, fencingToken: BigInt(fencingToken) },
    );
    return { ...reply.info, holders };
  }

  /** A file store cannot list its keys (lock files are named by a hash of the key). */
  async list(): Promise<LockInfo[]> {
    throw new Error("RemoteFileLocker does not forward list: a file store cannot list its keys");
  }

  #lease(id: number, key: string, fencingToken: string | undefined): Lease {
    const lost = new AbortController();
    this.#lost.set(id, lost);
    let outcome: Promise<ReleaseOutcome> | undefined;
    const releaseWithOutcome = (): Promise<ReleaseOutcome> => {
      outcome ??= this.#call({ op: "release" }, id).then((reply) => reply.outcome ?? "unknown");
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
        const reply = await this.#call({ op: "handOff" }, id);
        if (!reply.ok || reply.handle === undefined) throw new RemoteError(reply.error ?? { message: "failed" });
        return reply.handle;
      },
      [Symbol.asyncDispose]: () => release(),
    };
  }

  /**
   * Spins until epoch ms `at`, then one tryAcquire; a lease won is held until `release()`.
   * `lostRace`: this contender found the stale entry but another removed it first.
   */
  async raceAt(key: string, at: number): Promise<{ won: boolean; lostRace: boolean; release(): Promise<unknown> }> {
    const id = this.#nextId++;
    const reply = await this.#call({ op: "raceAt", key, at }, id);
    if (!reply.ok) throw new RemoteError(reply.error ?? { message: "failed" });
    return {
      won: reply.won === true,
      lostRace: reply.lostRace === true,
      release: () => this.#call({ op: "release" }, id),
    };
  }

  /** The child's wall clock, `Date.now()` there (stepped by libfaketime in the clock tests). */
  async wallClock(): Promise<number> {
    const reply = await this.#call({ op: "clock" });
    return reply.now as number;
  }

  /** The child's `waitingCount`: callers waiting in its locker. */
  async waiting(): Promise<number> {
    const reply = await this.#call({ op: "waiting" });
    return reply.waiting ?? Number.NaN;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || !this.child.connected) return;
    await this.#call({ op: "close" });
  }

  /** Closes the locker and ends the child. */
  async stop(): Promise<void> {
    await this.close().catch(() => undefined);
    if (this.child.connected) this.child.disconnect();
    await this.exited;
  }
}

function noop(): ReleaseFunc {
  const release = async (): Promise<void> => undefined;
  return Object.assign(release, { [Symbol.asyncDispose]: release });
}
