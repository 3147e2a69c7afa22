/**
 * The contended loop shared by the in-process and the multi-process scenarios: workers take one
 * key, hold it, release it, again and again, and only what happens inside the measured window
 * counts.
 */
import { now, settleWithin, sleep, waitUntil } from "./timing.mjs";

/**
 * @typedef {object} ContentionResult
 * @property {number[]} completions critical sections per worker whose lock was obtained in the window
 * @property {number[]} waits ms from calling lock to obtaining it, for those critical sections
 * @property {number[]} holds ms from obtaining the lock to calling release (the hold), same set
 * @property {number} failures acquisitions that gave up inside the window
 * @property {boolean} drained whether every worker finished within the drain time after the window
 */

/**
 * Runs one worker per entry of `sessions` (entries may repeat: workers then share a session) on
 * `key`. Workers start at local time `startAt`, stop calling `lock` once `windowEnd` passed, and
 * each critical section is a timer of `holdMs` (setTimeout: the event loop stays free).
 * @param {object} options
 * @param {import("./redis-contenders.mjs").Session[]} options.sessions
 * @param {string} options.key
 * @param {number} options.holdMs
 * @param {number} options.startAt local `performance.now()` time
 * @param {number} options.windowStart local time
 * @param {number} options.windowEnd local time
 * @param {number} options.drainMs how long to wait for workers still blocked after the window
 * @returns {Promise<ContentionResult>}
 */
export async function contend({ sessions, key, holdMs, startAt, windowStart, windowEnd, drainMs }) {
  const completions = sessions.map(() => 0);
  const waits = [];
  const holds = [];
  let failures = 0;
  const inWindow = (t) => t >= windowStart && t < windowEnd;

  const worker = async (session, index) => {
    while (now() < windowEnd) {
      const asked = now();
      const release = await session.lock(key);
      const got = now();
      if (release === undefined) {
        if (inWindow(got)) failures++;
        continue;
      }
      await sleep(holdMs);
      const held = now() - got;
      await release();
      if (inWindow(got)) {
        completions[index]++;
        waits.push(got - asked);
        holds.push(held);
      }
    }
  };

  await waitUntil(startAt);
  const all = Promise.all(sessions.map(worker)).then(() => true);
  const drained = await settleWithin(all, windowEnd - now() + drainMs, false);
  return { completions, waits, holds, failures, drained };
}
