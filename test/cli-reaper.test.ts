/**
 * The reaper of `globallock run` (src/cli/tether.ts): a /bin/sh script that, when the wrapper's
 * pipes close (it exited) without "done" on the second, SIGKILLs every process whose environment carries the run's marker,
 * and leaves everything alone after "done". Real processes: `sleep`s started with and without the
 * marker, one of them a grandchild in a shell that left nothing but its environment behind.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import type { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { RUN_ID_ENV, startReaper } from "../src/cli/tether.js";
import { eventually } from "./helpers/wait.js";

/** Whether `pid` is running (not gone, not a zombie). */
function running(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

/** The mask of SIGHUP (1), SIGINT (2) and SIGTERM (15), as /proc/PID/status shows ignored signals. */
const TRAPPED = (1n << 0n) | (1n << 1n) | (1n << 14n);

/** The signals `pid` ignores (its SigIgn mask). */
function ignoredSignals(pid: number): bigint {
  const match = /^SigIgn:\s+([0-9a-f]+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match === null ? 0n : BigInt(`0x${match[1]}`);
}

describe.skipIf(process.platform !== "linux")("the reaper (a shell script, not a Node process)", () => {
  const started: number[] = [];
  afterEach(() => {
    for (const pid of started.splice(0)) if (running(pid)) process.kill(pid, "SIGKILL");
  });

  /** Starts `sleep 300` (with the marker of `runId` when given) in a shell; its pid and the shell's. */
  async function sleeper(runId: string | undefined): Promise<{ shell: ChildProcess; pid: number }> {
    const env = { ...process.env };
    delete env[RUN_ID_ENV];
    if (runId !== undefined) env[RUN_ID_ENV] = runId;
    const shell = spawn("sh", ["-c", 'sleep 300 & echo "$!"; wait'], { env, stdio: ["ignore", "pipe", "ignore"] });
    const [line] = (await once(shell.stdout as NodeJS.ReadableStream, "data")) as [Buffer];
    const pid = Number(line.toString().trim());
    started.push(pid, shell.pid as number);
    return { shell, pid };
  }

  it("the pipe closed without done: every marked process is killed, grandchildren too; others live", async () => {
    const runId = randomBytes(12).toString("hex");
    const marked = await sleeper(runId);
    const other = await sleeper(randomBytes(12).toString("hex"));
    const unmarked = await sleeper(undefined);
    const reaper = startReaper(runId) as ChildProcess;
    expect(reaper).toBeDefined();
    const exited = once(reaper, "exit");
    // What the wrapper's death does.
    reaper.stdin?.destroy();
    (reaper.stdio[3] as Writable).destroy();
    expect(await exited).toEqual([0, null]);
    await eventually(() => !running(marked.pid) && !running(marked.shell.pid as number), 20_000);
    expect(running(other.pid)).toBe(true);
    expect(running(unmarked.pid)).toBe(true);
  });

  it('"done" first: it leaves once the wrapper is gone, without killing anything, and ignores SIGTERM', async () => {
    const runId = randomBytes(12).toString("hex");
    const marked = await sleeper(runId);
    const reaper = startReaper(runId) as ChildProcess;
    const exited = once(reaper, "exit");
    // The shell's `trap` is set before it reads: a first SIGTERM could come before it runs.
    await eventually(() => (ignoredSignals(reaper.pid as number) & TRAPPED) === TRAPPED);
    reaper.kill("SIGTERM");
    (reaper.stdio[3] as Writable).end("done\n");
    // It does not wake up for "done": it leaves when the wrapper's pipes close (here: the test's).
    await new Promise((resolve) => setTimeout(resolve, 50).unref());
    expect(reaper.exitCode).toBeNull();
    reaper.stdin?.end();
    expect(await exited).toEqual([0, null]);
    expect(running(marked.pid)).toBe(true);
  });
});
