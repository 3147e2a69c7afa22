/**
 * How `globallock run` ties its command to the wrapper (src/cli/tether.ts): one spawn of
 * `setpriv --pdeathsig KILL -- /bin/sh -c LAUNCH_SCRIPT …`, whose shell starts the reaper as an
 * orphan, marks the command's environment and execs the command. When the wrapper's pipes close
 * without "done" on the second (it died), the reaper SIGKILLs every process whose environment
 * carries the run's marker, and it leaves everything alone after "done". Real processes: this test
 * process plays the wrapper (closing the pipes is what its death does); `sleep`s started with and
 * without the marker, one of them a grandchild in a shell that left nothing but its environment.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { findSetpriv, RUN_ID_ENV, spawnTethered, type TetheredChild } from "../../src/cli/tether.js";
import { eventually, sleep } from "../helpers/wait.js";

/** Whether `pid` is running (not gone, not a zombie). */
function running(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

/** A field of /proc/PID/status (`PPid`, `SigIgn`, …). */
function statusField(pid: number, field: string): string | undefined {
  return new RegExp(`^${field}:\\s+(\\S+)`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
}

/** The mask of SIGHUP (1), SIGINT (2) and SIGTERM (15), as /proc/PID/status shows ignored signals. */
const TRAPPED = (1n << 0n) | (1n << 1n) | (1n << 14n);

/** Whether `pid`'s exec-time environment holds `entry` exactly. */
function environHas(pid: number, entry: string): boolean {
  return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(entry);
}

/** Whether `pid` has file descriptor `fd` open. */
function hasFd(pid: number, fd: number): boolean {
  return existsSync(`/proc/${pid}/fd/${fd}`);
}

/**
 * The running processes whose command line holds `globallock-run RUN_ID`: the launch shell, the
 * subshell that forks the reaper (briefly: it can still be listed after the launch shell has
 * exec'ed the command), and the reaper.
 */
function launchedWith(runId: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0");
      const at = argv.indexOf("globallock-run");
      if (at > 0 && argv[at + 1] === runId && running(Number(name))) pids.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

describe.skipIf(process.platform !== "linux")("the command's tether: one spawn, an orphaned shell reaper", () => {
  const started: number[] = [];
  const work = mkdtempSync(join(tmpdir(), "globallock-tether-"));
  afterEach(() => {
    for (const pid of started.splice(0)) if (running(pid)) process.kill(pid, "SIGKILL");
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

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

  /** `spawnTethered(argv)`, and the reaper's pid once the shell has exec'ed the command. */
  async function tethered(argv: [string, ...string[]]): Promise<{ run: TetheredChild; reaper: number }> {
    const run = spawnTethered(argv, { ...process.env, [RUN_ID_ENV]: "an-outer-run" });
    started.push(run.child.pid as number);
    expect(run.tether.reaper).toBe(true);
    const runId = run.runId as string;
    // Before the exec, the launch shell matches too, and so does the subshell that forks the reaper,
    // which holds both pipes (fds 3 and 4) until it exits. The reaper has moved the "done" pipe to
    // fd 3 and closed fd 4.
    let found: number[] = [];
    await eventually(() => {
      found = launchedWith(runId).filter((pid) => pid !== run.child.pid && hasFd(pid, 3) && !hasFd(pid, 4));
      return found.length === 1 && environHas(run.child.pid as number, `${RUN_ID_ENV}=${runId}`);
    }, 20_000);
    const reaper = found[0] as number;
    started.push(reaper);
    return { run, reaper };
  }

  /** What the wrapper's death does to the reaper's pipes. */
  function closePipes(run: TetheredChild): void {
    (run.child.stdio[3] as Writable).destroy();
    (run.child.stdio[4] as Writable).destroy();
  }

  it("the pipes closed without done: the command and its children are killed; others live", async () => {
    const pidFile = join(work, "pids");
    const { run, reaper } = await tethered(["sh", "-c", `sleep 300 & echo "$$ $!" > ${pidFile}; wait`]);
    await eventually(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").endsWith("\n"), 20_000);
    const [shell, grandchild] = readFileSync(pidFile, "utf8").trim().split(" ").map(Number) as [number, number];
    started.push(grandchild);
    expect(shell).toBe(run.child.pid);
    // The command has no unknown child (a program that waits for all its children would wait for
    // the reaper, which waits for the wrapper): the reaper is an orphan. It carries no marker.
    expect(Number(statusField(reaper, "PPid"))).not.toBe(run.child.pid);
    expect(environHas(reaper, `${RUN_ID_ENV}=${run.runId}`)).toBe(false);
    expect(environHas(reaper, `${RUN_ID_ENV}=an-outer-run`)).toBe(false);
    const other = await sleeper(randomBytes(12).toString("hex"));
    const unmarked = await sleeper(undefined);
    const exited = once(run.child, "exit");
    closePipes(run);
    expect(await exited).toEqual([null, "SIGKILL"]);
    await eventually(() => !running(grandchild) && !running(reaper), 20_000);
    expect(running(other.pid)).toBe(true);
    expect(running(unmarked.pid)).toBe(true);
  });

  it('"done" first: the reaper leaves once the wrapper is gone, kills nothing, and ignores SIGTERM', async () => {
    const { run, reaper } = await tethered(["sleep", "300"]);
    // The shell's `trap` is set before it reads: a first SIGTERM could come before it runs.
    await eventually(() => (BigInt(`0x${statusField(reaper, "SigIgn") ?? "0"}`) & TRAPPED) === TRAPPED);
    process.kill(reaper, "SIGTERM");
    run.disarm();
    // It does not wake up for "done": it leaves when the wrapper's pipes close (here: the test's).
    await sleep(50);
    expect(running(reaper)).toBe(true);
    closePipes(run);
    await eventually(() => !running(reaper), 20_000);
    expect(running(run.child.pid as number)).toBe(true);
  });

  it("a program that cannot be found is spawned as it is: its error names it, nothing else starts", async () => {
    const run = spawnTethered(["globallock-no-such-program"], process.env);
    const [error] = (await once(run.child, "error")) as [NodeJS.ErrnoException];
    expect(error.code).toBe("ENOENT");
    expect(error.message).toContain("globallock-no-such-program");
    expect(run.tether).toEqual({ pdeathsig: false, reaper: false });
  });
});

describe.skipIf(process.platform !== "linux")("findSetpriv: --pdeathsig read off the file, not asked", () => {
  const work = mkdtempSync(join(tmpdir(), "globallock-setpriv-"));
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  /** A directory of `work` holding an executable `name` with `content`; the directory. */
  function withProgram(dir: string, name: string, content: string): string {
    const path = join(work, dir);
    mkdirSync(path);
    writeFileSync(join(path, name), content);
    chmodSync(join(path, name), 0o755);
    return path;
  }

  it("takes a setpriv whose option table names pdeathsig; not one without it, nor a multi-call binary", () => {
    const knows = withProgram("knows", "setpriv", "\x7fELF…\0nnp\0pdeathsig\0reuid\0");
    const older = withProgram("older", "setpriv", "\x7fELF…\0nnp\0reuid\0 --pdeathsig in a sentence\0");
    const busybox = withProgram("busybox", "busybox", "\x7fELF…\0pdeathsig\0");
    symlinkSync(join(busybox, "busybox"), join(busybox, "setpriv"));
    expect(findSetpriv(knows)).toBe(join(knows, "setpriv"));
    expect(findSetpriv(older)).toBeUndefined();
    expect(findSetpriv(busybox)).toBeUndefined();
    expect(findSetpriv(join(work, "nowhere"))).toBeUndefined();
  });
});
