/**
 * The uncontended rows of the newer stores' scenarios (table lockers, ZooKeeper, Memcached): the
 * locker and its raw floor (bench/lib/store-floors.mjs) on the same client, sequential lock +
 * release on one key each, in interleaved rounds (A, B, A, B, …). Per row: the p50 and p99 of one
 * acquire + release (pooled over the rounds), the sequential rate (median of the rounds) and the
 * rate as a ratio to the floor's, taken per round against the floor's rate in the same round,
 * then the median.
 */
import { median, percentile } from "./stats.mjs";
import { renderStoreContention } from "./store-contention.mjs";
import { sequential } from "./store-loops.mjs";

/**
 * @typedef {{ id: string, label: string, floor?: boolean, once(): Promise<unknown> }} FloorContender
 *   `floor`: the row the others are compared with (exactly one).
 * @typedef {{ rounds: number, opsPerRound: number, warmUpOps: number }} FloorRounds
 */

/**
 * A contender that locks `key` on `locker` (anything with `lock(signal, key)` resolving to its
 * release) and releases it.
 * @param {string} id @param {string} label
 * @param {{ lock(signal: undefined, key: string): Promise<() => unknown> }} locker
 * @param {string} key @param {boolean} [floor]
 * @returns {FloorContender}
 */
export function pairOn(id, label, locker, key, floor = false) {
  return { id, label, floor, once: async () => (await locker.lock(undefined, key))() };
}

/**
 * Runs `contenders` in interleaved rounds; their rows, in order.
 * @param {FloorContender[]} contenders
 * @param {FloorRounds} config
 */
export async function measureAgainstFloor(contenders, config) {
  const floor = contenders.find((c) => c.floor);
  if (floor === undefined) throw new Error("measureAgainstFloor: no floor among the contenders");
  const samples = new Map(contenders.map((c) => [c.id, { latency: [], rates: [] }]));
  for (const c of contenders) await sequential(c.once, config.warmUpOps);
  for (let round = 0; round < config.rounds; round++) {
    for (const c of contenders) {
      const result = await sequential(c.once, config.opsPerRound);
      const mine = samples.get(c.id);
      mine.latency.push(...result.samples);
      mine.rates.push(result.opsPerSec);
    }
  }
  const floorRates = samples.get(floor.id).rates;
  return contenders.map((c) => {
    const { latency, rates } = samples.get(c.id);
    return {
      id: c.id,
      label: c.label,
      floor: c.floor === true,
      p50Us: median(latency) * 1000,
      p99Us: percentile(latency, 99) * 1000,
      opsPerSec: median(rates),
      rateToFloor: median(rates.map((rate, round) => rate / floorRates[round])),
    };
  });
}

const us = (value) => `${Math.round(value)} µs`;

/** The Markdown table of {@link measureAgainstFloor}'s rows. */
export function renderFloorRows(rows) {
  return [
    "| contender | acquire + release p50 | p99 | ops/s (sequential) | rate ÷ floor's |",
    "| --- | ---: | ---: | ---: | ---: |",
    ...rows.map(
      (r) =>
        `| ${r.label} | ${us(r.p50Us)} | ${us(r.p99Us)} | ${Math.round(r.opsPerSec).toLocaleString("en-US")} | ${
          r.floor ? "1 (floor)" : `${r.rateToFloor.toFixed(2)}×`
        } |`,
    ),
  ];
}

/**
 * A newer store's section of the report: `title` and the store (`results.store`: its name and
 * version), the uncontended rows, then the contended ones (and the polling ones, measured with
 * their own settings, if any).
 */
export function renderStoreSection(title, results) {
  const polling =
    results.polling === undefined ? [] : ["", ...renderStoreContention(results.polling, results.pollingSettings)];
  return [
    `## ${title} (${results.store})`,
    "",
    ...renderFloorRows(results.uncontended),
    "",
    ...renderStoreContention(results.contended),
    ...polling,
  ].join("\n");
}
