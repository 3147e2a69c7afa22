/**
 * A watchdog for the benchmark: when no progress line has been logged for `quietMs`, it reports
 * what the process is waiting for (the requests and handles libuv holds) and queues one cheap
 * file-system call (`stat` of the OS temporary directory). A run once stopped for 18 minutes with
 * one `rename` queued for libuv's thread pool and every pool thread idle (docs/benchmarks.md); this
 * says, should it happen again, whether a new request gets the stuck one going.
 */
import { stat } from "node:fs";
import { tmpdir } from "node:os";

/**
 * Starts watching; returns `progress()`, to call on every progress line, and `stop()`.
 * @param {(line: string) => void} log
 * @param {number} [quietMs]
 */
export function watchForStalls(log, quietMs = 120_000) {
  let last = performance.now();
  let reported = false;
  const timer = setInterval(() => {
    if (reported || performance.now() - last < quietMs) return;
    reported = true;
    const requests = process._getActiveRequests().map((request) => request.constructor.name);
    const handles = process._getActiveHandles().map((handle) => handle.constructor.name);
    log(
      `no progress for ${Math.round((performance.now() - last) / 1000)} s; pending requests: ${requests.join(", ") || "none"}; handles: ${handles.join(", ")}; queueing a stat to see whether it unsticks them`,
    );
    const queuedAt = performance.now();
    stat(tmpdir(), () => {
      const answeredMs = Math.round(performance.now() - queuedAt);
      // Counted once the stat's own request is done.
      setImmediate(() =>
        log(`the stat answered after ${answeredMs} ms; pending requests now: ${process._getActiveRequests().length}`),
      );
    });
  }, 5000);
  timer.unref();
  return {
    progress() {
      last = performance.now();
      reported = false;
    },
    stop() {
      clearInterval(timer);
    },
  };
}
