/**
 * Time helpers shared by the parent and the workers. Timestamps are wall-clock milliseconds built
 * from the monotonic clock (`performance.timeOrigin + performance.now()`), so events recorded in
 * different processes on one machine can be compared, and no process sees time go backwards.
 */
import { performance } from "node:perf_hooks";

/** Milliseconds since the epoch, monotonic within a process, comparable across processes. */
export function now() {
  return performance.timeOrigin + performance.now();
}

/** Resolves after `ms` milliseconds (a plain timer: a blocked or stopped process sleeps longer). */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/** Keeps the event loop busy for `ms` milliseconds: no timer, I/O or promise runs meanwhile. */
export function busyWait(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin: this is the fault being injected
  }
}

/**
 * Settles like `promise`, or rejects with an Error naming `label` after `ms`. The timer is cleared
 * as soon as `promise` settles, so nothing keeps the process alive.
 */
export function within(promise, ms, label) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${label}: not done within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Rounds a duration for reports. */
export function ms(value) {
  return Number.isFinite(value) ? Math.round(value) : value;
}
