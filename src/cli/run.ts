/**
 * `globallock run`: take the lock (waiting as asked), run the command with inherited stdio while
 * the lease is extended, forward signals, react to a lost lock, release after the command exited,
 * and exit with the command's status (or one of {@link EXIT}'s).
 */
import type { ChildProcess } from "node:child_process";
import { constants } from "node:os";
import { InvalidArgumentError, type LockLostError, StoreUnavailableError, UnsupportedError } from "../errors.js";
import type { AcquireOptions, Lease, LockInfo } from "../locker.js";
import { EXIT } from "./exit-codes.js";
import { describeHolders, lockInfoJson } from "./holders.js";
import type { RunCommand } from "./invocation.js";
import { formatMs, type Reporter } from "./reporter.js";
import { type OpenStore, openStore } from "./store.js";
import { spawnTethered } from "./tether.js";

/** The signals forwarded to the command (and that interrupt a wait). */
const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
type Forwarded = (typeof FORWARDED)[number];

/** Why a wait was given up (the reason of its abort). */
class Interrupted extends Error {
  constructor(readonly signal: Forwarded) {
    super(`interrupted by ${signal}`);
  }
}
class WaitTimedOut extends Error {}

/** How often the waiting line is redrawn, and how often it asks who holds the key. */
const STATUS_EVERY_MS = 200;
const HOLDER_EVERY_MS = 1000;

/** Runs `cmd`; resolves to the exit status. Never rejects for expected failures. */
export async function runCommand(cmd: RunCommand, reporter: Reporter): Promise<number> {
  const interrupt = new AbortController();
  let child: ChildProcess | undefined;
  const onSignal = (signal: Forwarded): void => {
    if (child !== undefined) {
      // A terminal's Ctrl-C reaches the command itself (same process group): do not send it twice.
      const forwarded = !(signal === "SIGINT" && process.stdin.isTTY === true);
      if (forwarded && child.exitCode === null && child.signalCode === null) child.kill(signal);
      reporter.event("signal", { signal, forwarded });
      return;
    }
    if (!interrupt.signal.aborted) interrupt.abort(new Interrupted(signal));
  };
  const listeners = FORWARDED.map((signal) => {
    const listener = (): void => onSignal(signal);
    process.on(signal, listener);
    return [signal, listener] as const;
  });
  let store: OpenStore | undefined;
  try {
    store = await openStore(cmd.store, { expiry: cmd.expiryMs, owner: cmd.owner }, cmd.shared, cmd.limit);
    interrupt.signal.throwIfAborted();
    const lease = await obtain(cmd, store, reporter, interrupt.signal);
    if (typeof lease === "number") return lease;
    return await runHolding(cmd, lease, reporter, interrupt.signal, (spawned) => {
      child = spawned;
    });
  } catch (error) {
    if (error instanceof Interrupted) {
      reporter.event("interrupted", { key: cmd.key, signal: error.signal });
      return EXIT.SIGNAL_BASE + constants.signals[error.signal];
    }
    return failure(error, cmd, reporter);
  } finally {
    for (const [signal, listener] of listeners) process.off(signal, listener);
    await store?.close().catch(() => undefined);
  }
}

/** Takes the lock as `cmd` asks: a lease, or the exit status when it was not obtained. */
async function obtain(
  cmd: RunCommand,
  store: OpenStore,
  reporter: Reporter,
  interrupt: AbortSignal,
): Promise<Lease | number> {
  const options: AcquireOptions = { fencing: cmd.fencingEnv !== undefined };
  if (cmd.expiryMs !== undefined) options.expiry = cmd.expiryMs;
  if (cmd.maxHoldMs !== undefined) options.maxHold = cmd.maxHoldMs;
  const startedAt = performance.now();
  const first = await store.locker.tryAcquire(interrupt, cmd.key, options);
  if (first !== undefined) return acquired(first, cmd, reporter, 0);
  const holder = await store.locker.inspect(undefined, cmd.key).catch(() => undefined);
  const holders = holder === undefined ? null : lockInfoJson(holder).holders;
  if (cmd.waitMs === 0) {
    reporter.event("not-acquired", { key: cmd.key, reason: "held", holders });
    reporter.say(`${lockOf(cmd)} is held by ${describeHolders(holder)}`, true);
    return cmd.conflictExitCode ?? EXIT.HELD;
  }
  reporter.event("waiting", { key: cmd.key, store: store.label, holders, waitMs: cmd.waitMs ?? null });
  const wait = new AbortController();
  const stop = (reason: unknown): void => {
    if (!wait.signal.aborted) wait.abort(reason);
  };
  const onInterrupt = (): void => stop(interrupt.reason);
  interrupt.addEventListener("abort", onInterrupt, { once: true });
  const timer = cmd.waitMs === undefined ? undefined : setTimeout(() => stop(new WaitTimedOut()), cmd.waitMs);
  const line = waitingLine(cmd, store, reporter, startedAt, holder);
  try {
    const lease = await store.locker.acquire(wait.signal, cmd.key, options);
    return acquired(lease, cmd, reporter, performance.now() - startedAt);
  } catch (error) {
    if (!(wait.signal.aborted && error === wait.signal.reason)) throw error;
    if (error instanceof Interrupted) {
      reporter.event("interrupted", { key: cmd.key, signal: error.signal });
      return EXIT.SIGNAL_BASE + constants.signals[error.signal];
    }
    const waited = performance.now() - startedAt;
    reporter.event("not-acquired", { key: cmd.key, reason: "timeout", waitedMs: Math.round(waited) });
    reporter.say(`gave up waiting for ${lockOf(cmd)} after ${formatMs(waited)}`, true);
    return cmd.conflictExitCode ?? EXIT.WAIT_TIMED_OUT;
  } finally {
    clearTimeout(timer);
    line.stop();
    interrupt.removeEventListener("abort", onInterrupt);
  }
}

function acquired(lease: Lease, cmd: RunCommand, reporter: Reporter, waitedMs: number): Lease {
  reporter.event("acquired", { key: cmd.key, waitedMs: Math.round(waitedMs), fencingToken: lease.fencingToken });
  return lease;
}

/** What messages call the lock of `cmd`: `lock "k"`, or with `--limit N` `"k" (at most N runs)`. */
function lockOf(cmd: RunCommand): string {
  return cmd.limit === undefined ? `lock "${cmd.key}"` : `"${cmd.key}" (at most ${cmd.limit} runs)`;
}

/** On a terminal: "waiting for lock "k" (held by host:1 (exclusive, …)) — waited 1.2 s", redrawn. */
function waitingLine(
  cmd: RunCommand,
  store: OpenStore,
  reporter: Reporter,
  startedAt: number,
  initial: LockInfo | undefined,
): { stop(): void } {
  if (!reporter.interactive) return { stop: () => undefined };
  let holder = initial;
  let askedAt = performance.now();
  let asking = false;
  const draw = (): void => {
    reporter.status(
      `globallock: waiting for ${lockOf(cmd)} (held by ${describeHolders(holder)}) — waited ${formatMs(performance.now() - startedAt)}`,
    );
    if (!asking && performance.now() - askedAt >= HOLDER_EVERY_MS) {
      asking = true;
      askedAt = performance.now();
      void store.locker.inspect(undefined, cmd.key).then(
        (found) => {
          holder = found;
          asking = false;
        },
        () => {
          asking = false;
        },
      );
    }
  };
  draw();
  const timer = setInterval(draw, STATUS_EVERY_MS);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      reporter.clearStatus();
    },
  };
}

/** Runs the command while `lease` is held; releases it after the command exits. */
async function runHolding(
  cmd: RunCommand,
  lease: Lease,
  reporter: Reporter,
  interrupt: AbortSignal,
  started: (child: ChildProcess) => void,
): Promise<number> {
  const env = { ...process.env };
  if (cmd.fencingEnv !== undefined) env[cmd.fencingEnv] = String(lease.fencingToken);
  const program = cmd.argv[0];
  if (interrupt.aborted) {
    // A signal came while the command was being prepared: it is not started.
    await lease.releaseWithOutcome();
    throw interrupt.reason;
  }
  const tethered = spawnTethered(cmd.argv, env);
  const { child } = tethered;
  started(child);
  let stoppedForLoss = false;
  let killTimer: NodeJS.Timeout | undefined;
  const onLost = (): void => {
    const error = lease.lost.reason as LockLostError;
    reporter.event("lost", { key: cmd.key, reason: error.reason, message: error.message, action: cmd.onLost });
    if (cmd.onLost === "warn") {
      reporter.say(`warning: ${error.message}; the command keeps running (--on-lost kill would stop it)`);
      return;
    }
    reporter.say(`${error.message}; stopping the command (SIGTERM, SIGKILL after ${formatMs(cmd.killAfterMs)})`);
    stoppedForLoss = true;
    child.kill("SIGTERM");
    reporter.event("killing", { signal: "SIGTERM", pid: child.pid });
    killTimer = setTimeout(() => {
      reporter.event("killing", { signal: "SIGKILL", pid: child.pid });
      child.kill("SIGKILL");
    }, cmd.killAfterMs);
  };
  lease.lost.addEventListener("abort", onLost, { once: true });
  const ended = await new Promise<{ code: number | null; signal: NodeJS.Signals | null } | { error: Error }>(
    (resolve) => {
      child.once("error", (error) => resolve({ error }));
      child.once("exit", (code, signal) => resolve({ code, signal }));
      child.once("spawn", () =>
        reporter.event("started", { key: cmd.key, pid: child.pid, command: cmd.argv, tether: tethered.tether }),
      );
    },
  );
  tethered.disarm();
  clearTimeout(killTimer);
  lease.lost.removeEventListener("abort", onLost);
  const outcome = await lease.releaseWithOutcome();
  if ("error" in ended) {
    const code = (ended.error as { code?: unknown }).code === "ENOENT" ? EXIT.NOT_FOUND : EXIT.CANNOT_EXECUTE;
    reporter.event("error", { key: cmd.key, message: ended.error.message, exitCode: code, released: outcome });
    reporter.say(`cannot run ${JSON.stringify(program)}: ${ended.error.message}`);
    return code;
  }
  reporter.event("exited", { key: cmd.key, code: ended.code, signal: ended.signal });
  reporter.event("released", { key: cmd.key, outcome });
  if (stoppedForLoss) return EXIT.LOCK_LOST;
  if (ended.signal !== null) return EXIT.SIGNAL_BASE + (constants.signals[ended.signal] ?? 0);
  return ended.code ?? EXIT.INTERNAL;
}

/** The exit status (and message) of an error of the store or of the options. */
export function failure(error: unknown, cmd: { key: string }, reporter: Reporter): number {
  const code =
    error instanceof StoreUnavailableError
      ? EXIT.STORE_UNAVAILABLE
      : error instanceof InvalidArgumentError || error instanceof UnsupportedError
        ? EXIT.USAGE
        : EXIT.INTERNAL;
  const message = error instanceof Error ? error.message : String(error);
  reporter.event("error", { key: cmd.key, exitCode: code, code: (error as { code?: unknown })?.code, message });
  reporter.say(code === EXIT.INTERNAL && error instanceof Error ? (error.stack ?? message) : message);
  return code;
}
