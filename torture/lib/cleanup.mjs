/**
 * The process-wide backstop: every child process the torture suite starts (workers and
 * redis-servers) is registered here and killed when this process exits, however it exits. A
 * stopped (SIGSTOP) child gets SIGCONT first so that SIGKILL is delivered at once.
 *
 * Normal runs stop their children themselves, in `finally` blocks; this is for crashes, Ctrl-C
 * and failed assertions.
 */

const children = new Set();
let exitHookInstalled = false;

/** Kills one child process (SIGCONT, then SIGKILL), ignoring a child that is already gone. */
export function killHard(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    child.kill("SIGCONT");
    child.kill("SIGKILL");
  } catch {
    // already gone
  }
}

/** Registers a child process to be killed when this process exits; returns an unregister function. */
export function track(child) {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", killAllChildren);
  }
  children.add(child);
  child.once("exit", () => children.delete(child));
  return () => children.delete(child);
}

/** Kills every registered child that is still running (synchronous; safe in an 'exit' handler). */
export function killAllChildren() {
  for (const child of children) killHard(child);
}

/** Number of registered children still running. */
export function liveChildCount() {
  let count = 0;
  for (const child of children) if (child.exitCode === null && child.signalCode === null) count += 1;
  return count;
}

/** True when a process with this pid exists (a zombie counts as gone only once reaped). */
export function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}

/**
 * For command-line entry points: on SIGINT or SIGTERM, kill every child and exit with the
 * conventional status (128 + signal number). Not installed by library code, so a test runner's own
 * signal handling is left alone.
 */
export function installSignalHandlers() {
  for (const [signal, number] of [
    ["SIGINT", 2],
    ["SIGTERM", 15],
  ]) {
    process.once(signal, () => {
      killAllChildren();
      process.exit(128 + number);
    });
  }
}
