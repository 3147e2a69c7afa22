/**
 * CPU placement. On a 2-vCPU machine, loopback latency is bimodal when the scheduler moves Node and
 * redis-server between CPUs, so when `taskset` exists the benchmark pins Node (and everything it
 * forks) to CPU 0 and redis-server to CPU 1.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus } from "node:os";

/** CPU that runs the Node benchmark processes. */
export const NODE_CPU = 0;
/** CPU that runs redis-server. */
export const REDIS_CPU = 1;

let pinned = false;

function hasTaskset() {
  try {
    execFileSync("taskset", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/**
 * Pins every thread of this process to {@link NODE_CPU} (children inherit the affinity), when
 * `taskset` exists and the machine has at least two CPUs. Returns whether pinning is in effect.
 * @returns {boolean}
 */
export function pinSelf() {
  if (pinned) return true;
  if (cpus().length < 2 || !hasTaskset()) return false;
  execFileSync("taskset", ["-a", "-cp", String(NODE_CPU), String(process.pid)], { stdio: "ignore" });
  pinned = true;
  return true;
}

/** Whether {@link pinSelf} pinned this process. */
export function isPinned() {
  return pinned;
}

/**
 * The command and arguments that run `command` on {@link REDIS_CPU} when pinning is in effect.
 * @param {string} command
 * @param {string[]} args
 * @returns {[string, string[]]}
 */
export function onRedisCpu(command, args) {
  return pinned ? ["taskset", ["-c", String(REDIS_CPU), command, ...args]] : [command, args];
}

/** The CPU model name from /proc/cpuinfo (or os.cpus()), and the CPU count. */
export function cpuInfo() {
  let model = cpus()[0]?.model ?? "unknown";
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
    if (match) model = match[1].trim();
  } catch {
    // Not Linux: os.cpus() is good enough.
  }
  return { model, count: cpus().length };
}
