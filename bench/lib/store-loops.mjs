/**
 * The measuring loops the store scenarios (PostgreSQL, MySQL, etcd) share: sequential lock +
 * release latencies, and the hand-off from a holder to a blocked waiter.
 */
import { now, sleep } from "./timing.mjs";

/** Sequential lock + release `ops` times; per-op latencies (ms) and ops/s. */
export async function sequential(lockOnce, ops) {
  const samples = [];
  const start = now();
  for (let i = 0; i < ops; i++) {
    const t = now();
    await lockOnce();
    samples.push(now() - t);
  }
  return { samples, opsPerSec: (ops * 1000) / (now() - start) };
}

/**
 * B's wait after A's release, `reps` times (ms): A holds, B waits in lock(), A releases 3–12 ms
 * later at t0 (just before calling release), B's lock resolves at t1; the sample is t1 − t0.
 * `label`, when given, keeps the keys apart from another series of the same run.
 */
export async function handoff(a, b, reps, label) {
  const samples = [];
  for (let i = 0; i < reps; i++) {
    const key = label === undefined ? `handoff-${i}` : `handoff-${label}-${i}`;
    const releaseA = await a.lock(undefined, key);
    let t1 = 0;
    const blocked = b.lock(undefined, key).then((release) => {
      t1 = now();
      return release;
    });
    await sleep(3 + Math.random() * 9);
    const t0 = now();
    await releaseA();
    const releaseB = await blocked;
    samples.push(t1 - t0);
    await releaseB();
  }
  return samples;
}
