/**
 * Runs the BUILT `globallock` command (dist/cli/globallock.cjs, made by `npm run build`) as a user
 * would: a child process with its own stdio, exit status and signals.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { resolve } from "node:path";

/** The built executable. */
export const CLI = resolve(import.meta.dirname, "../../dist/cli/globallock.cjs");

/** Throws a clear message when the package has not been built. */
export function assertBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does).`);
}

/** A running `globallock` with its output so far. */
export interface RunningCli {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  /** Resolves once `stdout` (or `stderr`) matches. */
  waitFor(pattern: RegExp, stream?: "stdout" | "stderr", ms?: number): Promise<void>;
  /** Resolves with the exit status (128 + n for a signal) once it exited. */
  readonly exited: Promise<{ code: number; stdout: string; stderr: string; ms: number }>;
}

/** Starts `globallock ...args` (env merged into this process's, GLOBALLOCK_* removed). */
export function startCli(args: readonly string[], env: Record<string, string> = {}): RunningCli {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("GLOBALLOCK_")));
  const startedAt = performance.now();
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...clean, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const running: RunningCli = {
    child,
    stdout: "",
    stderr: "",
    waitFor: (pattern, stream = "stdout", ms = 10_000) =>
      new Promise((resolvePromise, reject) => {
        const check = (): boolean => {
          if (!pattern.test(running[stream])) return false;
          clearTimeout(timer);
          child[stream]?.off("data", check);
          resolvePromise();
          return true;
        };
        const timer = setTimeout(
          () => reject(new Error(`no ${pattern} on ${stream} within ${ms} ms: ${running[stream]} ${running.stderr}`)),
          ms,
        );
        if (!check()) child[stream]?.on("data", () => setImmediate(check));
      }),
    exited: new Promise((resolvePromise) => {
      child.on("close", (code, signal) => {
        const status = code ?? 128 + (signal === null ? 0 : constants.signals[signal]);
        resolvePromise({
          code: status,
          stdout: running.stdout,
          stderr: running.stderr,
          ms: performance.now() - startedAt,
        });
      });
    }),
  };
  child.stdout?.on("data", (chunk: Buffer) => {
    running.stdout += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    running.stderr += chunk.toString();
  });
  return running;
}

/** Runs `globallock ...args` to the end. */
export function runCli(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  return startCli(args, env).exited;
}

/**
 * `node -e <source>` as the command to run: a small program for the child side of a test (it
 * sees `process.env` and argv as any command would).
 */
export function nodeCommand(source: string): string[] {
  return [process.execPath, "-e", source];
}
