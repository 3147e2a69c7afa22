/**
 * What the processes of one host share and what tells them apart: the host name, the boot (its
 * id), the pid namespace, the monotonic clock, and a process's start time. A lock entry records
 * these for its holder (see `entry.ts`), so that another process of the same host and boot can
 * compare deadlines on a clock that wall-clock steps do not move, and can tell that the holder died.
 *
 * Linux only: without `/proc` (macOS, Windows, a container without it) the boot id is unknown, and
 * entries then fall back to wall-clock deadlines and are never judged dead by pid (see FileLocker).
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/** This host's name as entries carry it: safe characters only, at most 64 of them. */
export const HOST =
  hostname()
    .replace(/[^A-Za-z0-9.-]/g, "_")
    .slice(0, 64) || "host";

/** This boot's id (`/proc/sys/kernel/random/boot_id`, 32 hex digits), or `""` where there is none. */
export const BOOT_ID = readBootId();

/** The inode of this process's pid namespace (pids are only comparable within one), or 0 if unknown. */
export const PID_NAMESPACE = readPidNamespace();

/** This process's start time, in clock ticks since boot (0 if unknown). */
export const SELF_START_TIME = processStat(process.pid)?.startTime ?? 0;

/**
 * Milliseconds on this boot's monotonic clock (`CLOCK_MONOTONIC` on Linux, through libuv): the same
 * for every process of the boot, and not moved by wall-clock steps (NTP, `date -s`).
 */
export function monotonicNow(): number {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

/** What `/proc/PID/stat` says of a process: its state letter and start time; `undefined` if none. */
export interface ProcessStat {
  /** `R`, `S`, `D`, `T`, `Z` (zombie: dead, not yet reaped), … */
  readonly state: string;
  /** Clock ticks since boot at which the process started. */
  readonly startTime: number;
  /** Its process group id. */
  readonly processGroup: number;
}

/**
 * Reads `/proc/PID/stat` (synchronously: one small read, cheaper than a trip through the thread
 * pool). The command name (field 2) may hold spaces and parentheses, so fields are counted after
 * the last `)`: the state is field 3, the start time field 22.
 */
export function processStat(pid: number): ProcessStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const startTime = Number(fields[19]);
  const processGroup = Number(fields[2]);
  if (fields[0] === undefined || !Number.isSafeInteger(startTime) || !Number.isSafeInteger(processGroup))
    return undefined;
  return { state: fields[0], startTime, processGroup };
}

/**
 * Whether process `pid` (of this host, boot and pid namespace) is gone, with everything it left
 * behind in the process group it led: the process is gone (`ESRCH`; `EPERM` means it exists) or a
 * zombie, and no live process remains in process group `pid` — or the pid now runs a process
 * started at another time than `startTime` (the pid was reused, so its old group is empty: Linux
 * does not reuse a pid still in use as a group id). `startTime` 0: unknown, only existence counts.
 *
 * The group matters for a holder that ran commands under its lock: `globallock run` killed with
 * SIGKILL leaves its command's children running in its group for the few ms its reaper needs, and
 * a lock taken over then would let a second command start beside them.
 */
export function processGone(pid: number, startTime: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return startTime !== 0 && SELF_START_TIME !== 0 && startTime !== SELF_START_TIME;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as { code?: unknown }).code === "ESRCH") return !groupLives(pid);
  }
  const stat = processStat(pid);
  if (stat === undefined) return false; // gone just now, or no /proc: the next look decides
  if (startTime !== 0 && stat.startTime !== startTime) return true;
  return stat.state === "Z" && !groupLives(pid, true);
}

/**
 * Whether a live process is in process group `group` (whose leader is gone, or a zombie: a zombie
 * still counts as a member for `kill`, so its group is then read from `/proc`).
 */
function groupLives(group: number, leaderIsZombie = false): boolean {
  if (!leaderIsZombie) {
    try {
      process.kill(-group, 0);
      return true;
    } catch (error) {
      return (error as { code?: unknown }).code === "EPERM";
    }
  }
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return false;
  }
  for (const name of names) {
    const pid = Number(name);
    if (!Number.isSafeInteger(pid) || pid === group) continue;
    const stat = processStat(pid);
    if (stat !== undefined && stat.processGroup === group && stat.state !== "Z") return true;
  }
  return false;
}

function readBootId(): string {
  try {
    const id = readFileSync("/proc/sys/kernel/random/boot_id", "latin1").trim().replace(/-/g, "").toLowerCase();
    return /^[0-9a-f]{32}$/.test(id) ? id : "";
  } catch {
    return "";
  }
}

function readPidNamespace(): number {
  try {
    const match = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"));
    return match === null ? 0 : Number(match[1]);
  } catch {
    return 0;
  }
}
