/** Every scenario, in report order. */
import burst from "./burst.mjs";
import control from "./control.mjs";
import etcdHolderPaused from "./etcd-holder-paused.mjs";
import etcdLeaderKilled from "./etcd-leader-killed.mjs";
import etcdNoFaults from "./etcd-no-faults.mjs";
import fileBurst from "./file-burst.mjs";
import fileClockStep from "./file-clock-step.mjs";
import fileHolderKilled from "./file-holder-killed.mjs";
import fileHolderPaused from "./file-holder-paused.mjs";
import fileNoFaults from "./file-no-faults.mjs";
import fileStaleRace from "./file-stale-race.mjs";
import holderKilled from "./holder-killed.mjs";
import holderPaused from "./holder-paused.mjs";
import longSection from "./long-section.mjs";
import loopBlocked from "./loop-blocked.mjs";
import memory from "./memory.mjs";
import noFaults from "./no-faults.mjs";
import partition from "./partition.mjs";
import quorum from "./quorum.mjs";
import quorumEven from "./quorum-even.mjs";
import quorumRestore from "./quorum-restore.mjs";
import readWrite from "./read-write.mjs";
import readWriteStop from "./read-write-stop.mjs";
import redisPaused from "./redis-paused.mjs";
import redisRestart from "./redis-restart.mjs";
import scriptFlush from "./script-flush.mjs";
import semaphore from "./semaphore.mjs";
import semaphoreKill from "./semaphore-kill.mjs";
import sentinelFailover from "./sentinel-failover.mjs";
import slowLink from "./slow-link.mjs";

/** The scenarios of the profiles, in report order. */
export const SCENARIOS = [
  control,
  noFaults,
  memory,
  longSection,
  holderKilled,
  holderPaused,
  loopBlocked,
  redisRestart,
  redisPaused,
  quorum,
  slowLink,
  scriptFlush,
  quorumRestore,
  sentinelFailover,
  semaphore,
  semaphoreKill,
  readWrite,
  readWriteStop,
  fileNoFaults,
  fileHolderKilled,
  fileHolderPaused,
  fileStaleRace,
  partition,
  burst,
  fileBurst,
  fileClockStep,
  etcdNoFaults,
  etcdHolderPaused,
  etcdLeaderKilled,
];

/** Scenarios run only when asked for by id (`--only`): they document known failures. */
export const OPT_IN_SCENARIOS = [quorumEven];

/** The scenario with this id (from either list); throws on an unknown id. */
export function scenarioById(id) {
  const all = [...SCENARIOS, ...OPT_IN_SCENARIOS];
  const scenario = all.find((s) => s.id === id);
  if (scenario === undefined) throw new Error(`unknown scenario "${id}"; known: ${all.map((s) => s.id).join(", ")}`);
  return scenario;
}
