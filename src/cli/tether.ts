/**
 * Ties the command of `globallock run` to the wrapper's life. Nothing keeps the lock alive once the
 * wrapper is gone, so a SIGKILLed (or crashed) wrapper must not leave its command running: another
 * `globallock run` on the key would run beside it once the lease expires. On Linux, two mechanisms,
 * neither needing a native build:
 *
 * - **The command itself** is started through util-linux `setpriv --pdeathsig KILL -- command…`:
 *   setpriv sets the parent-death signal (prctl PR_SET_PDEATHSIG) and execs the command, keeping
 *   its pid; the kernel SIGKILLs it the moment the wrapper's spawning thread (Node's main thread)
 *   exits, however it died.
 * - **Its descendants** (`sh -c 'worker & wait'`, or a daemon that left the process group) are not
 *   reached by that signal. The command's environment carries a marker, `GLOBALLOCK_RUN_ID=<random>`,
 *   which children inherit; a small reaper ({@link REAPER_SCRIPT}, a POSIX shell script run as
 *   `/bin/sh -c`, not a second Node process: its start costs a millisecond, not Node's start-up)
 *   waits for the wrapper to exit (a pipe that closes when it does). When the command exited
 *   normally the wrapper has written "done" on a second pipe and the reaper leaves; without it
 *   (the wrapper died), the reaper SIGKILLs every process whose environment (`/proc/PID/environ`,
 *   the environment it was exec'ed with) carries the marker, until a round finds none it has not
 *   killed yet. "done" goes on a pipe the reaper is not reading: a write that woke it up would
 *   let it take the CPU from the wrapper while the wrapper releases the lock, and on a loaded
 *   machine the wrapper would then wait for its turn again (measured: 0.3 s at load 26 on 2 cores).
 *
 * Limits: a descendant that exec'ed with a cleared environment escapes the reaper; where setpriv,
 * `/proc` or `/bin/sh` is missing (macOS, minimal images), the missing part is skipped: the command
 * may then outlive a SIGKILLed wrapper, as before. The reaper needs a `grep` that knows `-z` (GNU
 * grep, BusyBox's).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { Writable } from "node:stream";

/** The environment variable that marks the command and its descendants. */
export const RUN_ID_ENV = "GLOBALLOCK_RUN_ID";
/** The shell that runs {@link REAPER_SCRIPT}. */
const SHELL = "/bin/sh";

/**
 * The reaper, run as `/bin/sh -c REAPER_SCRIPT globallock-reaper RUN_ID` with two pipes from the
 * wrapper: its standard input, on which nothing is written, and fd 3, on which the wrapper writes
 * "done" once the command exited. It ignores SIGINT, SIGTERM and SIGHUP (a terminal's Ctrl-C
 * reaches it too) and reads its standard input until the wrapper is gone (end of file); then it
 * reads fd 3: "done" and it leaves; nothing (the wrapper died before the command ended) and it
 * SIGKILLs every process whose exec-time environment
 * holds the exact entry `GLOBALLOCK_RUN_ID=RUN_ID` (one `grep -lzxF` over `/proc/[0-9]*\/environ`
 * a round), round after round until a round finds nobody it has not killed yet (a process that was
 * forking when its parent was killed leaves a new pid), at most 100 rounds.
 */
export const REAPER_SCRIPT = `trap '' INT TERM HUP
while IFS= read -r line; do :; done
IFS= read -r line <&3
[ "$line" = done ] && exit 0
marker="${RUN_ID_ENV}=$1"
killed=" "
round=0
while [ "$round" -lt 100 ]; do
  round=$((round + 1))
  found=
  for file in $(grep -lzxF -e "$marker" /proc/[0-9]*/environ 2>/dev/null); do
    pid=\${file#/proc/}
    pid=\${pid%/environ}
    case "$killed" in *" $pid "*) continue ;; esac
    killed="$killed$pid "
    found="$found $pid"
  done
  [ -z "$found" ] && exit 0
  kill -9 $found 2>/dev/null
done
`;

/** How the command is started, and what to do once it exited. */
export interface Tethered {
  readonly program: string;
  readonly args: string[];
  readonly env: NodeJS.ProcessEnv;
  /** Which mechanisms are in place (reported with the "started" event). */
  readonly tether: { readonly pdeathsig: boolean; readonly reaper: boolean };
  /** The command exited: the reaper leaves without killing anything. */
  disarm(): void;
}

/** Prepares `argv` to be spawned tied to this process (see the module comment). */
export async function tether(argv: readonly [string, ...string[]], env: NodeJS.ProcessEnv): Promise<Tethered> {
  const [program, ...args] = argv;
  const runId = randomBytes(12).toString("hex");
  const reaper = startReaper(runId);
  const commandEnv = reaper === undefined ? env : { ...env, [RUN_ID_ENV]: runId };
  // When the program cannot be found, spawn it directly: the spawn error names it as it always did.
  const setpriv = findProgram(program, env.PATH) === undefined ? undefined : await probeSetpriv(env.PATH);
  return {
    program: setpriv ?? program,
    args: setpriv === undefined ? args : ["--pdeathsig", "KILL", "--", program, ...args],
    env: commandEnv,
    tether: { pdeathsig: setpriv !== undefined, reaper: reaper !== undefined },
    disarm: () => {
      if (reaper === undefined) return;
      (reaper.stdio[3] as Writable | null)?.end("done\n");
    },
  };
}

/** Starts the reaper (Linux, with /proc and /bin/sh); undefined elsewhere. */
export function startReaper(runId: string): ChildProcess | undefined {
  if (process.platform !== "linux" || !existsSync("/proc/self/environ") || !existsSync(SHELL)) return undefined;
  const env = { ...process.env };
  delete env[RUN_ID_ENV];
  const child = spawn(SHELL, ["-c", REAPER_SCRIPT, "globallock-reaper", runId], {
    stdio: ["pipe", "ignore", "ignore", "pipe"],
    env,
  });
  child.on("error", () => undefined);
  child.unref();
  // Neither pipe keeps this process alive; both close when it exits (that is the reaper's cue).
  for (const pipe of [child.stdin, child.stdio[3]] as Array<(Writable & { unref?: () => void }) | null>) {
    pipe?.on("error", () => undefined);
    pipe?.unref?.();
  }
  return child;
}

let setprivProbe: { readonly pathEnv: string | undefined; readonly found: Promise<string | undefined> } | undefined;

/**
 * `setpriv` when it is on PATH and knows --pdeathsig (util-linux 2.33 and later), found by running
 * `setpriv --pdeathsig KILL -- true` once. Asynchronous, so that `globallock run` starts it first
 * and it runs while the store's modules load and the lock is taken (see bench/cli-startup.mjs).
 */
export function probeSetpriv(pathEnv: string | undefined): Promise<string | undefined> {
  if (setprivProbe !== undefined && setprivProbe.pathEnv === pathEnv) return setprivProbe.found;
  const path = process.platform === "linux" ? findProgram("setpriv", pathEnv) : undefined;
  const found =
    path === undefined
      ? Promise.resolve(undefined)
      : new Promise<string | undefined>((resolve) => {
          const probe = spawn(path, ["--pdeathsig", "KILL", "--", "true"], { stdio: "ignore", timeout: 5000 });
          probe.once("error", () => resolve(undefined));
          probe.once("exit", (code) => resolve(code === 0 ? path : undefined));
        });
  setprivProbe = { pathEnv, found };
  return found;
}

/** The executable file `program` resolves to (through PATH when it has no slash), or undefined. */
function findProgram(program: string, pathEnv: string | undefined): string | undefined {
  const candidates = program.includes("/")
    ? [program]
    : (pathEnv ?? "").split(delimiter).map((dir) => join(dir === "" ? "." : dir, program));
  return candidates.find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return statSync(candidate).isFile();
    } catch {
      return false;
    }
  });
}
