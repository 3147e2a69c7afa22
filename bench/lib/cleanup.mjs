/**
 * Process-wide cleanup for the benchmark: every child process it starts (redis-server, forked
 * workers) is registered here and killed when the benchmark exits, fails or is interrupted.
 */

/** Synchronous cleanup callbacks, run once on exit. */
const tasks = new Set();
let installed = false;
let ran = false;

function runAll() {
  if (ran) return;
  ran = true;
  for (const task of tasks) {
    try {
      task();
    } catch {
      // Best effort: one failing cleanup must not keep the others from running.
    }
  }
  tasks.clear();
}

function install() {
  if (installed) return;
  installed = true;
  process.once("exit", runAll);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal} received, stopping redis-server and workers\n`);
      runAll();
      process.exit(130);
    });
  }
}

/**
 * Registers a synchronous cleanup callback (e.g. kill a child with SIGKILL). Returns a function
 * that unregisters it, for when the resource was released normally.
 * @param {() => void} task
 * @returns {() => void}
 */
export function onCleanup(task) {
  install();
  tasks.add(task);
  return () => {
    tasks.delete(task);
  };
}
