/**
 * Scenario 3: 8 workers on ONE key, each critical section a 1 ms timer (setTimeout(1), so the
 * event loop stays free; the measured hold is reported), for a fixed window after a warm-up.
 *
 * (a) in one process: every worker with its own connection (and, for globallock, its own
 *     RedisLocker), like 8 independent clients; and globallock with 8 workers sharing one locker.
 * (b) in 2 forked processes with 4 workers each, started on a shared clock.
 *
 * Reported per contender (medians over interleaved rounds): critical sections per second and as a
 * fraction of the limit 1000 / (hold + t_pair) where t_pair is globallock's uncontended
 * acquire + release time from scenario 2; wait p50/p99 (lock call → lock obtained); fairness
 * (max/min completions per worker, Jain's index); acquisitions that gave up; and Redis commands
 * per critical section, counted by Redis (INFO commandstats, including commands run inside Lua
 * scripts) and by the clients (requests sent, i.e. network commands).
 */
import { fileURLToPath } from "node:url";
import {
  clientCommandSnapshot,
  diffCounts,
  processCpuMs,
  readCommandStats,
  readRedisCpuMs,
  sumCounts,
  totalOf,
} from "../lib/command-stats.mjs";
import { CONFIG } from "../lib/config.mjs";
import { contend } from "../lib/contention.mjs";
import { globallock, redisSemaphore, redlock1ms, redlockDefault } from "../lib/redis-contenders.mjs";
import { WorkerProcess } from "../lib/rpc.mjs";
import { jain, maxOverMin, median, percentile } from "../lib/stats.mjs";
import { epochNow, now, runAt } from "../lib/timing.mjs";

const WORKER_MODULE = fileURLToPath(new URL("../worker.mjs", import.meta.url));
const PROCESSES = 2;

/** In-process variants: `shared` means all workers share one session (one connection, one locker). */
const IN_PROCESS = [
  { id: "globallock-own", label: "globallock, own locker + connection per worker", contender: globallock },
  { id: "globallock-shared", label: "globallock, 8 workers share one locker", contender: globallock, shared: true },
  { id: "redlock-default", label: redlockDefault.label, contender: redlockDefault },
  { id: "redlock-1ms", label: redlock1ms.label, contender: redlock1ms },
  { id: "redis-semaphore", label: redisSemaphore.label, contender: redisSemaphore },
];

/** Two-process variants; `shared` here means one session per process, shared by its 4 workers. */
const TWO_PROCESS = [
  { id: "globallock-own", label: "globallock, own locker + connection per worker", contender: globallock },
  {
    id: "globallock-per-process",
    label: "globallock, one locker per process",
    contender: globallock,
    shared: true,
  },
  { id: "redlock-default", label: redlockDefault.label, contender: redlockDefault },
  { id: "redlock-1ms", label: redlock1ms.label, contender: redlock1ms },
  { id: "redis-semaphore", label: redisSemaphore.label, contender: redisSemaphore },
];

/** Opens the sessions of an in-process run and takes the warm-up key once with each. */
async function openSessions(variant, port, workers) {
  const sessions = variant.shared
    ? Array(workers).fill(await variant.contender.open(port))
    : await Promise.all(Array.from({ length: workers }, () => variant.contender.open(port)));
  for (const session of new Set(sessions)) {
    const release = await session.lock("bench:warm");
    await release?.();
  }
  return sessions;
}

/** Snapshot of both command counters and of the CPU time of Node (this process) and Redis. */
async function snapshot(monitor) {
  const client = clientCommandSnapshot();
  const nodeCpuMs = processCpuMs();
  return { server: await readCommandStats(monitor), redisCpuMs: await readRedisCpuMs(monitor), client, nodeCpuMs };
}

/** Snapshot of what Redis counted. */
async function serverSnapshot(monitor) {
  return { server: await readCommandStats(monitor), redisCpuMs: await readRedisCpuMs(monitor) };
}

/**
 * One in-process run.
 * @param {{ workers: number, holdMs: number, warmupMs: number, durationMs: number, drainMs: number }} [settings]
 */
export async function runInProcess(variant, key, port, monitor, settings = CONFIG.contended) {
  const { workers, holdMs, warmupMs, durationMs, drainMs } = settings;
  const sessions = await openSessions(variant, port, workers);
  try {
    const startAt = now() + 20;
    const windowStart = startAt + warmupMs;
    const windowEnd = windowStart + durationMs;
    const before = runAt(windowStart, () => snapshot(monitor));
    const after = runAt(windowEnd, () => snapshot(monitor));
    const run = await contend({ sessions, key, holdMs, startAt, windowStart, windowEnd, drainMs });
    const [b, a] = [await before, await after];
    return {
      ...run,
      server: diffCounts(b.server, a.server),
      client: diffCounts(b.client, a.client),
      nodeCpuMs: a.nodeCpuMs - b.nodeCpuMs,
      redisCpuMs: a.redisCpuMs - b.redisCpuMs,
    };
  } finally {
    for (const session of new Set(sessions)) await session.close();
  }
}

/** One run across the forked worker processes, started on a shared epoch schedule. */
export async function runAcrossProcesses(variant, key, port, monitor, processes, settings = CONFIG.contended) {
  const { workers, holdMs, warmupMs, durationMs, drainMs } = settings;
  const perProcess = workers / processes.length;
  await Promise.all(
    processes.map((p) =>
      p.call("prepareContention", {
        contenderId: variant.contender.id,
        port,
        workers: perProcess,
        shared: variant.shared === true,
        warmKey: "bench:warm",
      }),
    ),
  );
  const startAtEpoch = epochNow() + 100;
  const windowStartEpoch = startAtEpoch + warmupMs;
  const windowEndEpoch = windowStartEpoch + durationMs;
  const toLocal = (epoch) => now() + (epoch - epochNow());
  const before = runAt(toLocal(windowStartEpoch), () => serverSnapshot(monitor));
  const after = runAt(toLocal(windowEndEpoch), () => serverSnapshot(monitor));
  const parts = await Promise.all(
    processes.map((p) =>
      p.call("runContention", { key, holdMs, startAtEpoch, windowStartEpoch, windowEndEpoch, drainMs }),
    ),
  );
  return {
    completions: parts.flatMap((p) => p.completions),
    waits: parts.flatMap((p) => p.waits),
    holds: parts.flatMap((p) => p.holds),
    failures: parts.reduce((sum, p) => sum + p.failures, 0),
    drained: parts.every((p) => p.drained),
    server: diffCounts((await before).server, (await after).server),
    client: sumCounts(parts.map((p) => p.clientCommands)),
    nodeCpuMs: parts.reduce((sum, p) => sum + p.cpuMs, 0),
    redisCpuMs: (await after).redisCpuMs - (await before).redisCpuMs,
  };
}

/**
 * The per-run metrics of one contention run. With `permits` holders at once (a semaphore), the
 * limit is `permits` times a lock's.
 */
function metricsOf(run, durationMs, tPairMs, permits) {
  const cs = run.completions.reduce((a, b) => a + b, 0);
  const holdP50Ms = median(run.holds);
  const csPerSec = (cs * 1000) / durationMs;
  const limitPerSec = (permits * 1000) / (holdP50Ms + tPairMs);
  return {
    cs,
    csPerSec,
    limitPerSec,
    fractionOfLimit: csPerSec / limitPerSec,
    waitP50Ms: median(run.waits),
    waitP99Ms: percentile(run.waits, 99),
    holdP50Ms,
    maxOverMin: maxOverMin(run.completions),
    jain: jain(run.completions),
    failures: run.failures,
    serverCmdsPerCs: totalOf(run.server) / cs,
    clientCmdsPerCs: totalOf(run.client) / cs,
    starved: run.completions.filter((n) => n === 0).length,
    nodeCpuUsPerCs: (run.nodeCpuMs * 1000) / cs,
    redisCpuUsPerCs: (run.redisCpuMs * 1000) / cs,
    drained: run.drained,
  };
}

const FIELDS = [
  "csPerSec",
  "limitPerSec",
  "fractionOfLimit",
  "waitP50Ms",
  "waitP99Ms",
  "holdP50Ms",
  "maxOverMin",
  "jain",
  "failures",
  "serverCmdsPerCs",
  "clientCmdsPerCs",
  "starved",
  "nodeCpuUsPerCs",
  "redisCpuUsPerCs",
];

/**
 * Medians over rounds plus the pooled per-command breakdown (commands per critical section).
 * `permits`: how many may hold at once (1 for locks).
 */
export function summarize(variant, runs, tPairMs, { durationMs } = CONFIG.contended, permits = 1) {
  const rounds = runs.map((run) => ({ ...metricsOf(run, durationMs, tPairMs, permits), completions: run.completions }));
  const totalCs = rounds.reduce((sum, r) => sum + r.cs, 0);
  const perCs = (maps) =>
    Object.fromEntries(
      Object.entries(sumCounts(maps))
        .sort((x, y) => y[1] - x[1])
        .map(([name, count]) => [name, count / totalCs]),
    );
  return {
    id: variant.id,
    label: variant.label,
    ...Object.fromEntries(FIELDS.map((f) => [f, median(rounds.map((r) => r[f]))])),
    allDrained: rounds.every((r) => r.drained),
    serverBreakdown: perCs(runs.map((r) => r.server)),
    clientBreakdown: perCs(runs.map((r) => r.client)),
    rounds,
  };
}

/**
 * Runs scenario 3 (a) and (b).
 * @param {{ port: number, monitor: import("ioredis").Redis, tPairMs: number, log: (line: string) => void }} context
 */
export async function runContended({ port, monitor, tPairMs, log }) {
  const { rounds } = CONFIG.contended;
  const inProcessRuns = Object.fromEntries(IN_PROCESS.map((v) => [v.id, []]));
  const twoProcessRuns = Object.fromEntries(TWO_PROCESS.map((v) => [v.id, []]));
  const processes = Array.from({ length: PROCESSES }, () => new WorkerProcess(WORKER_MODULE));
  try {
    for (let round = 0; round < rounds; round++) {
      for (const variant of IN_PROCESS) {
        await monitor.flushall();
        const key = `bench:contended:${variant.id}:${round}`;
        inProcessRuns[variant.id].push(await runInProcess(variant, key, port, monitor));
      }
      log(`contended, one process: round ${round + 1}/${rounds} done`);
      for (const variant of TWO_PROCESS) {
        await monitor.flushall();
        const key = `bench:contended2:${variant.id}:${round}`;
        twoProcessRuns[variant.id].push(await runAcrossProcesses(variant, key, port, monitor, processes));
      }
      log(`contended, ${PROCESSES} processes: round ${round + 1}/${rounds} done`);
    }
  } finally {
    await Promise.all(processes.map((p) => p.close()));
  }
  return {
    config: { ...CONFIG.contended, hold: "setTimeout(holdMs)", processes: PROCESSES, tPairMs },
    inProcess: IN_PROCESS.map((v) => summarize(v, inProcessRuns[v.id], tPairMs)),
    twoProcesses: TWO_PROCESS.map((v) => summarize(v, twoProcessRuns[v.id], tPairMs)),
  };
}
