/**
 * Clocks and waits. All durations are in milliseconds from `performance.now()` (monotonic);
 * {@link epochNow} is a high-resolution wall clock comparable across processes on one machine.
 */
import { performance } from "node:perf_hooks";
import { setImmediate as immediate, setTimeout as timeout } from "node:timers/promises";

/** Monotonic time in ms (sub-microsecond resolution). */
export const now = () => performance.now();

/** High-resolution epoch time in ms: `performance.timeOrigin + performance.now()`. */
export const epochNow = () => performance.timeOrigin + performance.now();

/** Converts an epoch time (ms) to this process's `performance.now()` timeline. */
export const epochToLocal = (epochMs) => epochMs - performance.timeOrigin;

/**
 * Waits `ms` milliseconds with a timer.
 * @param {number} ms
 */
export const sleep = (ms) => timeout(ms);

/** Yields to the event loop once (a macrotask turn). */
export const yieldToEventLoop = () => immediate();

/**
 * Waits until the local monotonic time `at` (ms): a timer for the bulk, then spins on the last
 * millisecond, so that processes started on a shared schedule begin within microseconds.
 * @param {number} at
 */
export async function waitUntil(at) {
  const coarse = at - now() - 2;
  if (coarse > 0) await sleep(coarse);
  while (now() < at) {
    // Spin: the last 2 ms are waited precisely.
  }
}

/**
 * Resolves with `promise`'s value, or with `fallback` when it has not settled within `ms`.
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {T} fallback
 */
export async function settleWithin(promise, ms, fallback) {
  let timer;
  const expired = new Promise((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `fn` at local monotonic time `at` (a timer; late by the event loop's lag at most) and
 * resolves with its result.
 * @template T
 * @param {number} at
 * @param {() => T | Promise<T>} fn
 * @returns {Promise<T>}
 */
export function runAt(at, fn) {
  return new Promise((resolve, reject) => {
    setTimeout(
      () => {
        Promise.resolve().then(fn).then(resolve, reject);
      },
      Math.max(0, at - now()),
    );
  });
}
