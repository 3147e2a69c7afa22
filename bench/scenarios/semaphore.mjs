/**
 * Scenario 8: counting semaphores, globallock's RedisSemaphore against redis-semaphore's
 * Semaphore, both with 4 permits per key and one permit per acquisition, in the same run:
 *
 * - uncontended acquire + release, sequential and 8 keys at once, with the raw floor (SET NX PX +
 *   Lua DEL) in the same interleaved rounds: ops/s, ratio to the floor, CPU and commands per op
 *   (the loops of scenarios 1–2);
 * - contended: 16 workers on one key (limit 4), each critical section a 1 ms timer, in one process
 *   and in 2 processes × 8 (the loop of scenario 3): CS/s and as a fraction of the limit
 *   4 × 1000 / (hold p50 + t_pair), t_pair being RedisSemaphore's median uncontended
 *   acquire + release from the first part; waits; fairness (Jain's index over the 16 workers);
 * - hand-off latency (the repetitions of scenario 4) with the key's other 3 permits held
 *   throughout, so that B waits for A's permit; the raw direct grant (a mutex hand-off) runs as
 *   the floor.
 */
import { fileURLToPath } from "node:url";
import { CONFIG } from "../lib/config.mjs";
import { rawDirectGrant } from "../lib/raw-direct-grant.mjs";
import { globallockSemaphore, raw, redisSemaphoreSemaphore, SEMAPHORE_LIMIT } from "../lib/redis-contenders.mjs";
import { WorkerProcess } from "../lib/rpc.mjs";
import { runAcrossProcesses, runInProcess, summarize } from "./contended.mjs";
import { handoffVariants, measureHandoff } from "./handoff.mjs";
import { measureUncontended } from "./uncontended.mjs";

const WORKER_MODULE = fileURLToPath(new URL("../worker.mjs", import.meta.url));
const PROCESSES = 2;

/** In-process variants: `shared` means all workers share one session (one connection, one semaphore). */
const IN_PROCESS = [
  {
    id: "globallock-own",
    label: "globallock, own semaphore + connection per worker",
    contender: globallockSemaphore,
  },
  {
    id: "globallock-shared",
    label: "globallock, 16 workers share one semaphore",
    contender: globallockSemaphore,
    shared: true,
  },
  { id: "redis-semaphore", label: redisSemaphoreSemaphore.label, contender: redisSemaphoreSemaphore },
];

/** Two-process variants; `shared` here means one session per process, shared by its workers. */
const TWO_PROCESS = [
  IN_PROCESS[0],
  {
    id: "globallock-per-process",
    label: "globallock, one semaphore per process",
    contender: globallockSemaphore,
    shared: true,
  },
  IN_PROCESS[2],
];

/** Holds the key's other permits (all but one) for the whole hand-off measurement. */
async function holdOtherPermits(contender, port, key) {
  const session = await contender.open(port);
  const releases = [];
  for (let i = 1; i < SEMAPHORE_LIMIT; i++) releases.push(await session.lock(key));
  return {
    async close() {
      for (const release of releases) await release?.();
      await session.close();
    },
  };
}

const HANDOFF = handoffVariants([
  { contender: rawDirectGrant },
  { contender: globallockSemaphore, fill: (port, key) => holdOtherPermits(globallockSemaphore, port, key) },
  { contender: redisSemaphoreSemaphore, fill: (port, key) => holdOtherPermits(redisSemaphoreSemaphore, port, key) },
]);

/** Contended runs in interleaved rounds, in one process and across two. */
async function contended({ port, monitor, log }, tPairMs) {
  const settings = CONFIG.semaphore.contended;
  const inProcessRuns = Object.fromEntries(IN_PROCESS.map((v) => [v.id, []]));
  const twoProcessRuns = Object.fromEntries(TWO_PROCESS.map((v) => [v.id, []]));
  const processes = Array.from({ length: PROCESSES }, () => new WorkerProcess(WORKER_MODULE));
  try {
    for (let round = 0; round < settings.rounds; round++) {
      for (const variant of IN_PROCESS) {
        await monitor.flushall();
        const key = `bench:semaphore:contended:${variant.id}:${round}`;
        inProcessRuns[variant.id].push(await runInProcess(variant, key, port, monitor, settings));
      }
      for (const variant of TWO_PROCESS) {
        await monitor.flushall();
        const key = `bench:semaphore:contended2:${variant.id}:${round}`;
        twoProcessRuns[variant.id].push(await runAcrossProcesses(variant, key, port, monitor, processes, settings));
      }
      log(`semaphore: contended round ${round + 1}/${settings.rounds} done`);
    }
  } finally {
    await Promise.all(processes.map((p) => p.close()));
  }
  return {
    config: { ...settings, hold: "setTimeout(holdMs)", processes: PROCESSES, limit: SEMAPHORE_LIMIT, tPairMs },
    inProcess: IN_PROCESS.map((v) => summarize(v, inProcessRuns[v.id], tPairMs, settings, SEMAPHORE_LIMIT)),
    twoProcesses: TWO_PROCESS.map((v) => summarize(v, twoProcessRuns[v.id], tPairMs, settings, SEMAPHORE_LIMIT)),
  };
}

/**
 * Runs scenario 8.
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 */
export async function runSemaphore(context) {
  const { uncontended: uncontendedSettings, handoff: handoffSettings } = CONFIG.semaphore;
  const uncontended = await measureUncontended(
    [raw, globallockSemaphore, redisSemaphoreSemaphore],
    context,
    uncontendedSettings,
    "semaphore",
  );
  const tPairMs = uncontended.find((r) => r.id === globallockSemaphore.id).seqPairP50Ms;
  return {
    limit: SEMAPHORE_LIMIT,
    uncontended: { config: uncontendedSettings, results: uncontended, tPairMs },
    contended: await contended(context, tPairMs),
    handoff: {
      config: handoffSettings,
      floor: rawDirectGrant.id,
      ...(await measureHandoff(HANDOFF, context, handoffSettings, "semaphore")),
    },
  };
}
