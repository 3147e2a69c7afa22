/**
 * Ties the command of `globallock run` to the wrapper's life. Nothing keeps the lock alive once the
 * wrapper is gone, so a SIGKILLed (or crashed) wrapper must not leave its command running: another
 * `globallock run` on the key would run beside it once the lease expires. On Linux, two mechanisms,
 * neither needing a native build, both set up by the one spawn that starts the command
 * ({@link spawnTethered}):
 *
 * - **The command itself** is started through util-linux `setpriv --pdeathsig KILL -- …`: setpriv
 *   sets the parent-death signal (prctl PR_SET_PDEATHSIG), which survives the execs that follow;
 *   the kernel SIGKILLs the command the moment the wrapper's spawning thread (Node's main thread)
 *   exits, however it died. Whether setpriv knows the option is read off its file, not asked by
 *   running it ({@link findSetpriv}).
 * - **Its descendants** (`sh -c 'worker & wait'`, or a daemon that left the process group) are not
 *   reached by that signal. The command's environment carries a marker, `GLOBALLOCK_RUN_ID=<random>`,
 *   which children inherit. The spawned program is `/bin/sh -c` {@link LAUNCH_SCRIPT}: it starts
 *   the reaper ({@link REAPER_SCRIPT}) as an orphan (a subshell of a subshell that has already
 *   exited, so the command never sees an unknown child of its own), then sets the marker and execs
 *   the command, which keeps the pid the wrapper spawned. The reaper waits for the wrapper to exit
 *   (a pipe that closes when it does). When the command exited normally the wrapper has written
 *   "done" on a second pipe and the reaper leaves; without it (the wrapper died), the reaper
 *   SIGKILLs every process whose environment (`/proc/PID/environ`, the environment it was exec'ed
 *   with) carries the marker, until a round finds none it has not killed yet. The reaper itself was
 *   forked before the marker was set, so it is not among them. "done" goes on a pipe the reaper is
 *   not reading: a write that woke it up would let it take the CPU from the wrapper while the
 *   wrapper releases the lock, and on a loaded machine the wrapper would then wait for its turn
 *   again (measured: 0.3 s at load 26 on 2 cores).
 *
 * One spawn instead of three (a setpriv probe, a reaper, the command): each spawn of a Node.js
 * process blocks its event loop until the child has exec'ed (see bench/cli-startup.mjs).
 *
 * Limits: a descendant that exec'ed with a cleared environment escapes the reaper; where setpriv,
 * `/proc` or `/bin/sh` is missing (macOS, minimal images), the missing part is skipped: the command
 * may then outlive a SIGKILLed wrapper, as before. The reaper needs a `grep` that knows `-z` (GNU
 * grep, BusyBox's).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { basename, delimiter, join } from "node:path";
import type { Writable } from "node:stream";

/** The environment variable that marks the command and its descendants. */
export const RUN_ID_ENV = "GLOBALLOCK_RUN_ID";
/** The shell that runs {@link LAUNCH_SCRIPT}. */
const SHELL = "/bin/sh";

/**
 * The reaper, run by {@link LAUNCH_SCRIPT} in a subshell whose standard input is a pipe from the
 * wrapper on which nothing is written, and whose fd 3 is a second pipe on which the wrapper writes
 * "done" once the command exited; `$1` is the run's id. It ignores SIGINT, SIGTERM and SIGHUP (a
 * terminal's Ctrl-C reaches it too) and reads its standard input until the wrapper is gone (end of
 * file); then it reads fd 3: "done" and it leaves; nothing (the wrapper died before the command
 * ended) and it SIGKILLs every process whose exec-time environment holds the exact entry
 * `GLOBALLOCK_RUN_ID=RUN_ID` (one `grep -lzxF` over `/proc/[0-9]*\/environ` a round), round after
 * round until a round finds nobody it has not killed yet (a process that was forking when its parent
 * was killed leaves a new pid), at most 100 rounds.
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

/**
 * What `/bin/sh -c` runs, as `sh -c LAUNCH_SCRIPT globallock-run RUN_ID COMMAND [ARGS…]`, with the
 * wrapper's two pipes on fds 3 (nothing is written: it closes when the wrapper exits) and 4 ("done"):
 * the reaper in a background subshell of a subshell (its standard input the first pipe, its fd 3
 * the second, its output discarded so that it holds none of the command's), then the marker, and
 * `exec` of the command with neither pipe.
 */
export const LAUNCH_SCRIPT = `( (
${REAPER_SCRIPT}) <&3 3<&4 4<&- >/dev/null 2>&1 & )
exec 3<&- 4<&-
${RUN_ID_ENV}=$1
export ${RUN_ID_ENV}
shift
exec "$@"
`;

/** The command, spawned tied to this process (see the module comment). */
export interface TetheredChild {
  /** The command's process (its pid is the command's, after the execs of setpriv and the shell). */
  readonly child: ChildProcess;
  /** The marker's value in the command's environment; undefined without a reaper. */
  readonly runId: string | undefined;
  /** Which mechanisms are in place (reported with the "started" event). */
  readonly tether: { readonly pdeathsig: boolean; readonly reaper: boolean };
  /** The command exited: the reaper leaves without killing anything. */
  disarm(): void;
}

/**
 * Spawns `argv` with inherited standard input, output and error and the environment `env`, tied to
 * this process (see the module comment). A program that cannot be found is spawned as it is: the
 * spawn's error names it.
 */
export function spawnTethered(argv: readonly [string, ...string[]], env: NodeJS.ProcessEnv): TetheredChild {
  const [program, ...args] = argv;
  const found = findProgram(program, env.PATH) !== undefined;
  const setpriv = found ? findSetpriv(env.PATH) : undefined;
  const runId = found && canReap() ? randomBytes(12).toString("hex") : undefined;
  let file = program;
  let fileArgs = args;
  let childEnv = env;
  if (runId !== undefined) {
    file = SHELL;
    fileArgs = ["-c", LAUNCH_SCRIPT, "globallock-run", runId, program, ...args];
    // The shell and the reaper it forks must not carry a marker (an outer run's): the launch script
    // sets this run's for the command only.
    childEnv = { ...env };
    delete childEnv[RUN_ID_ENV];
  }
  if (setpriv !== undefined) {
    fileArgs = ["--pdeathsig", "KILL", "--", file, ...fileArgs];
    file = setpriv;
  }
  const child = spawn(file, fileArgs, {
    stdio: runId === undefined ? "inherit" : ["inherit", "inherit", "inherit", "pipe", "pipe"],
    env: childEnv,
  });
  // Neither pipe keeps this process alive; both close when it exits (that is the reaper's cue).
  const pipes = runId === undefined ? [] : [child.stdio[3], child.stdio[4]];
  for (const pipe of pipes as Array<(Writable & { unref?: () => void }) | null>) {
    pipe?.on("error", () => undefined);
    pipe?.unref?.();
  }
  return {
    child,
    runId,
    tether: { pdeathsig: setpriv !== undefined, reaper: runId !== undefined },
    disarm: () => (pipes[1] as Writable | null | undefined)?.end("done\n"),
  };
}

/** Whether the reaper can run here: Linux, with /proc and /bin/sh. */
function canReap(): boolean {
  return process.platform === "linux" && existsSync("/proc/self/environ") && existsSync(SHELL);
}

/**
 * `setpriv` when it is on PATH and knows --pdeathsig (util-linux 2.33 and later), else undefined.
 * Decided without running it: the file, followed through links, must be named `setpriv` (not a
 * multi-call binary such as BusyBox's, whose setpriv has no --pdeathsig) and must hold the option's
 * name as getopt's table of long options stores it, `pdeathsig` between two NUL bytes. Running
 * `setpriv --pdeathsig KILL -- true` would answer the same question at the cost of a spawn, which
 * blocks the event loop until the child has exec'ed (see bench/cli-startup.mjs).
 */
export function findSetpriv(pathEnv: string | undefined): string | undefined {
  if (process.platform !== "linux") return undefined;
  const path = findProgram("setpriv", pathEnv);
  if (path === undefined) return undefined;
  try {
    if (basename(realpathSync(path)) !== "setpriv") return undefined;
    return readFileSync(path).includes(PDEATHSIG_OPTION) ? path : undefined;
  } catch {
    return undefined;
  }
}

/** How getopt_long's option table stores the name of setpriv's --pdeathsig: a C string. */
const PDEATHSIG_OPTION = Buffer.from("\0pdeathsig\0", "latin1");

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
