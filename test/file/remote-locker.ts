/**
 * A {@link Locker} whose calls run in a child process (remote-child.ts): the contract suites' peer
 * in another process, for the semaphores of every store. The child entry is bundled from the
 * sources by esbuild once per test file (no build of the package needed), into a folder under
 * node_modules so that it finds the packages it imports (pg, mysql2).
 *
 * Waits are aborted in the child when the caller's signal aborts (the call rejects with
 * `signal.reason`); a lease's `lost` follows the child's; `assertHeld` knows what the parent saw.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { build } from "esbuild";
import {
  type AcquireOptions,
  type Lease,
  type Locker,
  type LockInfo,
  LockLostError,
  type LockLostReason,
  type ReleaseFunc,
  type ReleaseOutcome,
} from "../../src/index.js";

interface Reply {
  id?: number;
  ok?: boolean;
  event?: string;
  reason?: LockLostReason;
  lease?: { fencingToken?: string } | null;
  outcome?: ReleaseOutcome;
  info?: LockInfo;
  waiting?: number;
  error?: { name?: string; code?: string; message: string };
}

/** Where bundled children go: inside the repository's node_modules, so that packages resolve. */
const BUNDLES = resolve(import.meta.dirname, "../../node_modules/.cache/globallock-test-children");

/**
 * Bundles the child entry `entry` (a .ts file next to the caller) into one ES module; resolves to
 * its path and a function that removes it.
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

export class RemoteLocker implements Locker {
  readonly child: ChildProcess;
  #nextId = 1;
  readonly #replies = new Map<number, (reply: Reply) => void>();
  readonly #lost = new Map<number, AbortController>();
  /** The child's exit. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(bundle: string) {
    this.child = fork(bundle, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    this.exited = new Promise((done) => this.child.once("exit", (code, signal) => done({ code, signal })));
    this.child.on("message", (message: Reply) => this.#onMessage(message));
  }

  /** Starts a child of `bundle` (see {@link bundleChild}) and opens its locker with `options`. */
  static async start(bundle: string, options: unknown): Promise<RemoteLocker> {
    const remote = new RemoteLocker(bundle);
    await new Promise<void>((done, fail) => {
      const onReady = (message: Reply): void => {
        if (message.event !== "ready") return;
        remote.child.off("message", onReady);
        done();
      };
      remote.child.on("message", onReady);
      void remote.exited.then(({ code, signal }) =>
        fail(new Error(`child exited before it was ready (${code ?? signal})`)),
      );
    });
    const reply = await remote.#call({ op: "open", options });
    if (!reply.ok) {
      remote.child.kill("SIGKILL");
      throw new RemoteError(reply.error ?? { message: "open failed" });
    }
    return remote;
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

  #call(message: Record<string, unknown>, id = this.#nextId++): Promise<Reply> {
    if (!this.child.connected) return Promise.resolve({ id, ok: false, error: { message: "the child is gone" } });
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

  adopt(): Promise<Lease> {
    return Promise.reject(new Error("RemoteLocker does not forward adopt"));
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

  list(): Promise<LockInfo[]> {
    return Promise.reject(new Error("RemoteLocker does not forward list"));
  }

  /** The child's `waitingCount`: callers waiting in its locker. */
  async waiting(): Promise<number> {
    const reply = await this.#call({ op: "waiting" });
    return reply.waiting ?? Number.NaN;
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
      handOff: () => Promise.reject(new Error("RemoteLocker does not forward handOff")),
      [Symbol.asyncDispose]: () => release(),
    };
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

  /** Kills the child at once (SIGKILL): a holder that crashed. Resolves once it is gone. */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }
}

function noop(): ReleaseFunc {
  const release = async (): Promise<void> => undefined;
  return Object.assign(release, { [Symbol.asyncDispose]: release });
}
