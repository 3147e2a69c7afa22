/**
 * Scenario 4: hand-off latency. A holds the key; B is blocked in lock(); A releases at t0
 * (just before calling release); B's lock resolves at t1; latency = t1 − t0, which includes A's
 * release round trip. A releases a random 3–12 ms after B called lock, so B is blocked and, for
 * polling libraries, the release falls at a random point of B's poll cycle.
 *
 * A and B always have separate sessions (connections; for globallock separate lockers). Every
 * contender is measured twice:
 * - B in this process: cheap to run, but for pollers optimistic, because A's release timer and
 *   B's retry timer share one event loop and tend to fire in the same turn;
 * - B in a forked process, timed on the shared epoch clock (`performance.timeOrigin +
 *   performance.now()`); the offset between the two processes' clocks is checked with an IPC ping
 *   (lowest-RTT sample) and reported. This is the realistic number.
 * Repetitions are spread over interleaved rounds and pooled.
 *
 * Two raw floors run with the libraries (bench/lib/raw-direct-grant.mjs): a direct grant (the
 * release script hands the key to the next queued waiter and publishes to it; one round trip) and
 * wake-then-claim (the release publishes, the waiter claims with SET NX; two round trips). Every
 * contender's p50 and p99 are also given as ratios to the direct grant's, same side (B in the same
 * process or in another), from the pooled samples of this run.
 */
import { fileURLToPath } from "node:url";
import { CONFIG } from "../lib/config.mjs";
import { rawDirectGrant, rawWakeClaim } from "../lib/raw-direct-grant.mjs";
import { globallock, redisSemaphore, redlock1ms, redlockDefault } from "../lib/redis-contenders.mjs";
import { WorkerProcess } from "../lib/rpc.mjs";
import { mean, median, percentile } from "../lib/stats.mjs";
import { epochNow, now, sleep } from "../lib/timing.mjs";

const WORKER_MODULE = fileURLToPath(new URL("../worker.mjs", import.meta.url));

const CONTENDERS = [
  { contender: rawDirectGrant },
  { contender: rawWakeClaim },
  { contender: globallock },
  { contender: redlockDefault, slow: true },
  { contender: redlock1ms },
  { contender: redisSemaphore },
];

/**
 * Each contender twice: B in this process and B in another. `fill` (optional): takes what must be
 * held on the key before the repetitions (a semaphore's other permits) and resolves to something
 * with `close()`.
 * @param {{ contender: object, slow?: boolean, fill?: (port: number, key: string) => Promise<{ close(): Promise<void> }> }[]} contenders
 */
export function handoffVariants(contenders) {
  return contenders.flatMap(({ contender, slow, fill }) => [
    { id: `${contender.id}:local`, label: `${contender.label} — B in same process`, contender, slow, fill },
    {
      id: `${contender.id}:remote`,
      label: `${contender.label} — B in other process`,
      contender,
      slow,
      fill,
      remote: true,
    },
  ]);
}

const VARIANTS = handoffVariants(CONTENDERS);

/** A random pre-release hold in [min, max] ms. */
function preHold() {
  const { preHoldMinMs, preHoldMaxMs } = CONFIG.handoff;
  return preHoldMinMs + Math.random() * (preHoldMaxMs - preHoldMinMs);
}

/** B in this process: the latency in ms, or undefined when B gave up. */
export async function localRep(a, b, key) {
  const releaseA = await a.lock(key);
  let t1 = 0;
  const blocked = b.lock(key).then((release) => {
    t1 = now();
    return release;
  });
  await sleep(preHold());
  const t0 = now();
  await releaseA();
  const releaseB = await blocked;
  if (releaseB === undefined) return undefined;
  await releaseB();
  return t1 - t0;
}

/** B in the worker process: the latency on the epoch clock, or undefined when B gave up. */
export async function remoteRep(a, worker, sessionId, key) {
  const releaseA = await a.lock(key);
  await worker.call("block", { sessionId, key });
  await sleep(preHold());
  const t0 = epochNow();
  await releaseA();
  const { t1 } = await worker.call("acquired", { sessionId });
  return t1 === undefined ? undefined : t1 - t0;
}

/** Estimated offset of the worker's epoch clock from ours (ms), from the lowest-RTT of 30 pings. */
export async function clockOffset(worker) {
  let best = { rtt: Number.POSITIVE_INFINITY, offset: Number.NaN };
  for (let i = 0; i < 30; i++) {
    const sent = epochNow();
    const theirs = await worker.call("clock");
    const received = epochNow();
    if (received - sent < best.rtt) best = { rtt: received - sent, offset: theirs - (sent + received) / 2 };
  }
  return best;
}

/**
 * Interleaved hand-off repetitions of `variants` (see {@link handoffVariants}), B in this process or
 * in a forked one; per variant the pooled samples' p50, p99, mean, min, max, and, when the raw direct
 * grant is among the variants, the ratios to its p50 and p99 on the same side. Also used by the
 * semaphore scenario.
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 * @param {{ rounds: number, reps: number, slowReps: number, maxMsPerContender: number }} settings
 * @param {string} name the scenario's name in progress lines and keys
 */
export async function measureHandoff(variants, { port, monitor, log }, settings, name = "handoff") {
  const { rounds, reps, slowReps, maxMsPerContender } = settings;
  const worker = new WorkerProcess(WORKER_MODULE);
  const state = new Map();
  const keyOf = (variant) => `bench:${name}:${variant.id}`;
  try {
    for (const variant of variants) {
      const a = await variant.contender.open(port);
      const b = variant.remote ? undefined : await variant.contender.open(port);
      if (variant.remote) {
        await worker.call("prepareHandoff", { sessionId: variant.id, contenderId: variant.contender.id, port });
      }
      state.set(variant.id, { a, b, target: variant.slow ? slowReps : reps, samples: [], failures: 0, spentMs: 0 });
    }
    const clock = await clockOffset(worker);
    await monitor.flushall();
    for (const variant of variants) state.get(variant.id).filled = await variant.fill?.(port, keyOf(variant));
    for (let round = 0; round < rounds; round++) {
      for (const variant of variants) {
        const s = state.get(variant.id);
        const quota = Math.ceil((s.target * (round + 1)) / rounds);
        const key = keyOf(variant);
        const started = now();
        while (s.samples.length + s.failures < quota && s.spentMs + (now() - started) < maxMsPerContender) {
          const latency = variant.remote
            ? await remoteRep(s.a, worker, variant.id, key)
            : await localRep(s.a, s.b, key);
          if (latency === undefined) s.failures++;
          else s.samples.push(latency);
        }
        s.spentMs += now() - started;
      }
      log(`${name}: hand-off round ${round + 1}/${rounds} done`);
    }
    const results = variants.map((variant) => {
      const s = state.get(variant.id);
      return {
        id: variant.id,
        label: variant.label,
        contender: variant.contender.id,
        remote: variant.remote === true,
        reps: s.samples.length,
        failures: s.failures,
        p50Ms: median(s.samples),
        p99Ms: percentile(s.samples, 99),
        meanMs: mean(s.samples),
        minMs: Math.min(...s.samples),
        maxMs: Math.max(...s.samples),
        samples: s.samples,
      };
    });
    for (const r of results) {
      const floor = results.find((f) => f.contender === rawDirectGrant.id && f.remote === r.remote);
      r.p50VsGrant = r.p50Ms / floor?.p50Ms;
      r.p99VsGrant = r.p99Ms / floor?.p99Ms;
    }
    return { clockOffsetMs: clock.offset, clockPingRttMs: clock.rtt, results };
  } finally {
    for (const s of state.values()) {
      await s.filled?.close();
      await s.a.close();
      await s.b?.close();
    }
    await worker.call("closeHandoffs").catch(() => undefined);
    await worker.close();
  }
}

/**
 * Runs scenario 4.
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 */
export async function runHandoff(context) {
  const measured = await measureHandoff(VARIANTS, context, CONFIG.handoff);
  return { config: CONFIG.handoff, floor: rawDirectGrant.id, ...measured };
}
