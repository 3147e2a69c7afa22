/**
 * Small statistics helpers: medians, percentiles, fairness.
 */

/**
 * The `p`-th percentile (0–100) of `values`, by linear interpolation between closest ranks.
 * Returns NaN for an empty list.
 * @param {ArrayLike<number>} values
 * @param {number} p
 */
export function percentile(values, p) {
  const sorted = Float64Array.from(values).sort();
  if (sorted.length === 0) return Number.NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  // Exact rank: return the value itself (interpolating would turn Infinity into NaN).
  if (low === high) return sorted[low];
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

/**
 * The median of `values` (NaN when empty).
 * @param {ArrayLike<number>} values
 */
export const median = (values) => percentile(values, 50);

/**
 * Arithmetic mean (NaN when empty).
 * @param {ArrayLike<number>} values
 */
export function mean(values) {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i];
  return values.length === 0 ? Number.NaN : sum / values.length;
}

/**
 * Jain's fairness index (Σx)² / (n·Σx²): 1 when every worker got the same share, 1/n when one
 * worker got everything.
 * @param {number[]} shares
 */
export function jain(shares) {
  const sum = shares.reduce((a, b) => a + b, 0);
  const squares = shares.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? Number.NaN : (sum * sum) / (shares.length * squares);
}

/**
 * max/min of per-worker completions (Infinity when a worker completed nothing).
 * @param {number[]} shares
 */
export function maxOverMin(shares) {
  const max = Math.max(...shares);
  const min = Math.min(...shares);
  return min === 0 ? (max === 0 ? Number.NaN : Number.POSITIVE_INFINITY) : max / min;
}

/**
 * Median over rounds of each numeric field of per-round result objects.
 * @param {Array<Record<string, number>>} rounds
 * @param {string[]} fields
 * @returns {Record<string, number>}
 */
export function medianOfRounds(rounds, fields) {
  return Object.fromEntries(fields.map((field) => [field, median(rounds.map((round) => round[field]))]));
}
