/**
 * The contended rows of the stores beside Redis (PostgreSQL, MySQL, etcd, lock files), measured
 * as scenario 3 measures Redis: `workers` workers in this process on ONE key, each with its own
 * session (its own locker and connection or client, as independent clients would be), each
 * critical section a `holdMs` timer (the event loop stays free), for `durationMs` after a warm-up;
 * rounds interleave the contenders.
 *
 * Per contender: critical sections per second (median of the rounds) and as a share of the limit
 * 1000 / (hold p50 + t_pair), where t_pair is the store's uncontended acquire + release p50 of
 * globallock's locker in the same scenario (one figure for every contender of the store, as
 * scenario 3 does); wait p50 and p99 (lock call → lock obtained, pooled); fairness (max/min
 * critical sections per worker and Jain's index, medians of the rounds); acquisitions that gave
 * up; and whether every worker was done within the drain time after the window.
 */
import { QUICK } from "./config.mjs";
import { contend } from "./contention.mjs";
import { jain, maxOverMin, median, percentile } from "./stats.mjs";
import { now } from "./timing.mjs";

/** The settings of every store's contended rows. */
export const STORE_CONTENTION = QUICK
  ? { rounds: 1, workers: 8, holdMs: 1, warmupMs: 100, durationMs: 500, drainMs: 3000 }
  : { rounds: 3, workers: 8, holdMs: 1, warmupMs: 200, durationMs: 2000, drainMs: 3000 };

/**
 * @typedef {{ lock(key: string): Promise<(() => unknown) | undefined>, close(): Promise<unknown> | unknown }} Session
 * @typedef {{ id: string, label: string, open(): Promise<Session> | Session }} StoreContender
 */

/**
 * Runs `contenders` on `key`, interleaved round by round (fresh sessions per round, each taking
 * a warm-up key once before the start).
 * @param {StoreContender[]} contenders
 * @param {string} key
 * @param {(line: string) => void} [log]
 * @param {typeof STORE_CONTENTION} [settings]
 */
export async function measureStoreContention(contenders, key, log = () => undefined, settings = STORE_CONTENTION) {
  const { rounds, workers, holdMs, warmupMs, durationMs, drainMs } = settings;
  const runs = new Map(contenders.map((c) => [c.id, []]));
  for (let round = 0; round < rounds; round++) {
    for (const contender of contenders) {
      const sessions = await Promise.all(Array.from({ length: workers }, () => contender.open()));
      try {
        for (const session of sessions) {
          const release = await session.lock(`${key}:warm`);
          await release?.();
        }
        const startAt = now() + 20;
        const windowStart = startAt + warmupMs;
        const windowEnd = windowStart + durationMs;
        runs.get(contender.id).push(await contend({ sessions, key, holdMs, startAt, windowStart, windowEnd, drainMs }));
      } finally {
        await Promise.allSettled(sessions.map((session) => session.close()));
      }
    }
    log(`contended round ${round + 1}/${rounds} done`);
  }
  return contenders.map((contender) => {
    const done = runs.get(contender.id);
    return {
      id: contender.id,
      label: contender.label,
      csPerSec: median(done.map((r) => (r.completions.reduce((a, b) => a + b, 0) * 1000) / durationMs)),
      holdP50Ms: median(done.flatMap((r) => r.holds)),
      waitP50Ms: median(done.flatMap((r) => r.waits)),
      waitP99Ms: percentile(
        done.flatMap((r) => r.waits),
        99,
      ),
      jain: median(done.map((r) => jain(r.completions))),
      maxOverMin: median(done.map((r) => maxOverMin(r.completions))),
      gaveUp: done.reduce((sum, r) => sum + r.failures, 0),
      drained: done.every((r) => r.drained),
    };
  });
}

/**
 * Adds each row's share of the limit 1000 / (hold p50 + `tPairMs`), the hold being the row's own
 * measured hold.
 * @param {ReturnType<typeof measureStoreContention> extends Promise<infer R> ? R : never} rows
 * @param {number} tPairMs
 */
export function withShareOfLimit(rows, tPairMs) {
  return rows.map((row) => ({ ...row, tPairMs, ofLimit: row.csPerSec / (1000 / (row.holdP50Ms + tPairMs)) }));
}

const fixed = (value, digits) => (Number.isFinite(value) ? value.toFixed(digits) : "–");

/** The Markdown lines of a store's contended rows (after {@link withShareOfLimit}). */
export function renderStoreContention(rows, settings = STORE_CONTENTION) {
  const first = rows[0];
  return [
    `Contended: ${settings.workers} workers on one key in this process, each with its own locker and connection, each critical section a ${settings.holdMs} ms timer; ${settings.durationMs} ms windows after ${settings.warmupMs} ms of warm-up, ${settings.rounds} interleaved round(s). "of limit" = CS/s ÷ (1000 / (hold p50 + t_pair)), t_pair = ${fixed(first?.tPairMs * 1000, 0)} µs (globallock's uncontended acquire + release p50 above).`,
    "",
    "| contender | CS/s | of limit | hold p50 (ms) | wait p50 (ms) | wait p99 (ms) | max/min per worker | Jain | gave up |",
    "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows.map(
      (r) =>
        `| ${r.label}${r.drained ? "" : " (not drained)"} | ${Math.round(r.csPerSec).toLocaleString("en-US")} | ${Math.round(r.ofLimit * 100)}% | ${fixed(r.holdP50Ms, 2)} | ${fixed(r.waitP50Ms, 2)} | ${fixed(r.waitP99Ms, 1)} | ${fixed(r.maxOverMin, 2)} | ${fixed(r.jain, 3)} | ${r.gaveUp} |`,
    ),
  ];
}
