/**
 * What the counted-lock scenarios (13–16: semaphores and read-write locks) share: the workers'
 * settings of each kind, and waits read from the workers' "acquired" events (call → grant, as the
 * worker timed it).
 */

/** Workers of a `RedisSemaphore` with the profile's limit and weights. */
export const semaphoreSettings = (p) => ({ mode: "semaphore", limit: p.limit, weights: p.weights });

/** Workers of a `RedisReadWriteLocker`, a seeded `writerShare` of sections writers. */
export const readWriteSettings = (p) => ({ mode: "rw", writerShare: p.writerShare });

/** The value at fraction `q` (0–1) of `sorted` (nearest rank), or NaN when empty. */
function quantile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/**
 * Waits of the acquisitions that match `predicate`, in ms: { count, p50, p99, max }.
 * @param {object[]} events every worker event of the run
 * @param {(event: object) => boolean} [predicate]
 */
export function waitsOf(events, predicate = () => true) {
  const waits = events
    .filter((e) => e.type === "acquired" && predicate(e))
    .map((e) => e.t - e.startedAt)
    .sort((a, b) => a - b);
  return {
    count: waits.length,
    p50: quantile(waits, 0.5),
    p99: quantile(waits, 0.99),
    max: waits.length === 0 ? Number.NaN : waits[waits.length - 1],
  };
}

/** "p50 3 / p99 18 / max 25 ms (n 240)" for a check's observed value. */
export function describeWaits(w) {
  return `p50 ${Math.round(w.p50)} / p99 ${Math.round(w.p99)} / max ${Math.round(w.max)} ms (n ${w.count})`;
}
