/**
 * Scenario 7: contention on a Redlock quorum with a node down. Five independent redis-servers of
 * the benchmark's own; four forked processes (bench/worker.mjs), each with one RedisLocker over
 * clients of all five (the repository's fault-test client settings, support/redis-server.mjs
 * RESILIENT_CLIENT: a command fails after one reconnection attempt, reconnecting every 50 ms),
 * contend on one key for 10 critical sections in total, each a `setTimeout(holdMs)` hold, started
 * on a shared epoch schedule (see lib/quorum.mjs for the worker side).
 *
 * Per round: a run with all five nodes up (a control), then one node is killed with SIGKILL, and
 * after `settleMs` a run with four of five. Each counted run follows an uncounted warm-up run of
 * one section per process on another key, so that it measures warm code and cached scripts. The node is restarted (empty) before the next round,
 * and the killed node changes from round to round.
 *
 * Reported per run, then summarized over rounds:
 * - section time: for the i-th section (ordered by when its lock was obtained), from the (i−1)-th
 *   section's release resolving (the first: from the start) to its own release resolving — what
 *   each section costs in the sequence: hand-off + hold + release. Compared with the bound
 *   3 × (hold + 1 RTT), where hold is the median measured hold of the run and RTT the median PING
 *   round trip from this process to a node that stays up, measured just before the run.
 * - total time: start → the last counted section's release resolving.
 * - hand-off gap: a section's release called → the next section's lock obtained.
 * - failed attempts: acquisition attempts (the acquire script's EVALSHA on one live node's client,
 *   noted per process) up to the last counted grant, minus one per section; per section, the
 *   attempts made between the previous grant and its own, minus its own.
 * - lock-step: how many of those attempts landed within 1 ms of an attempt by another process.
 */
import { fileURLToPath } from "node:url";
import { CONFIG } from "../lib/config.mjs";
import { connectClient } from "../lib/redis-client.mjs";
import { startServer } from "../lib/redis-server.mjs";
import { WorkerProcess } from "../lib/rpc.mjs";
import { median } from "../lib/stats.mjs";
import { epochNow, now, sleep } from "../lib/timing.mjs";

const WORKER_MODULE = fileURLToPath(new URL("../worker.mjs", import.meta.url));
/** Attempts of different processes this close together (ms) count as lock-step. */
const LOCKSTEP_MS = 1;

/** Median PING round trip (ms) to `port`. */
async function pingRoundTrip(port, count = 200) {
  const client = await connectClient(port);
  try {
    const samples = [];
    for (let i = 0; i < count; i++) {
      const start = now();
      await client.ping();
      samples.push(now() - start);
    }
    return median(samples);
  } finally {
    client.disconnect();
  }
}

/** The largest value (NaN for none). */
const maxOf = (values) => (values.length > 0 ? Math.max(...values) : Number.NaN);

/** What one run's parts add up to. */
function analyze(parts, { startAtEpoch, total, rttMs }) {
  const sections = parts
    .flatMap((part, process) => part.sections.map((s) => ({ ...s, process })))
    .sort((a, b) => a.got - b.got);
  const holds = sections.map((s) => s.releaseAt - s.got);
  const holdP50Ms = median(holds);
  const boundMs = 3 * (holdP50Ms + rttMs);
  const sectionMs = sections.map((s, i) => s.releasedAt - (i === 0 ? startAtEpoch : sections[i - 1].releasedAt));
  const handoffMs = sections.slice(1).map((s, i) => s.got - sections[i].releaseAt);
  const lastGrant = sections.at(-1)?.got ?? Number.POSITIVE_INFINITY;
  const attempts = parts
    .flatMap((part, process) => part.attempts.map((t) => ({ t, process })))
    .filter((a) => a.t <= lastGrant)
    .sort((a, b) => a.t - b.t);
  const failedPerSection = sections.map((s, i) => {
    const from = i === 0 ? Number.NEGATIVE_INFINITY : sections[i - 1].got;
    return Math.max(0, attempts.filter((a) => a.t > from && a.t <= s.got).length - 1);
  });
  const lockstep = attempts.filter((a, i) => {
    for (let j = i - 1; j >= 0 && a.t - attempts[j].t <= LOCKSTEP_MS; j--) {
      if (attempts[j].process !== a.process) return true;
    }
    for (let j = i + 1; j < attempts.length && attempts[j].t - a.t <= LOCKSTEP_MS; j++) {
      if (attempts[j].process !== a.process) return true;
    }
    return false;
  }).length;
  return {
    sections: sections.length,
    complete: sections.length === total,
    holdP50Ms,
    rttMs,
    boundMs,
    sectionMs,
    withinBound: sectionMs.filter((ms) => ms <= boundMs).length,
    maxSectionMs: maxOf(sectionMs),
    medianSectionMs: median(sectionMs),
    totalMs: (sections.at(-1)?.releasedAt ?? Number.NaN) - startAtEpoch,
    handoffP50Ms: median(handoffMs),
    handoffMaxMs: maxOf(handoffMs),
    attempts: attempts.length,
    failedAttempts: failedPerSection.reduce((a, b) => a + b, 0),
    failedPerSection,
    lockstepAttempts: lockstep,
    errors: parts.flatMap((part) => part.errors),
    perProcess: parts.map((part) => ({
      sections: part.sections.length,
      // Attempt times relative to the start (ms), for the record.
      attemptsMs: part.attempts.map((t) => Number((t - startAtEpoch).toFixed(3))),
    })),
    order: sections.map((s) => s.process),
  };
}

/**
 * One run of `total` sections (by default the configured count) on `key` across the worker
 * processes.
 */
async function runOnce(workers, { key, countKey, rttMs, total = CONFIG.quorum.sections }) {
  const { holdMs, timeoutMs } = CONFIG.quorum;
  const startAtEpoch = epochNow() + 100;
  const deadlineEpoch = startAtEpoch + timeoutMs;
  const parts = await Promise.all(
    workers.map((w) => w.call("runQuorum", { key, countKey, total, holdMs, startAtEpoch, deadlineEpoch })),
  );
  return analyze(parts, { startAtEpoch, total, rttMs });
}

/** Summary over rounds of one kind of run (all up / one down). */
function summarize(runs) {
  const sectionMs = runs.flatMap((r) => r.sectionMs);
  return {
    rounds: runs.length,
    roundsAllWithinBound: runs.filter((r) => r.complete && r.withinBound === r.sections).length,
    sectionsWithinBound: runs.reduce((sum, r) => sum + r.withinBound, 0),
    sectionsTotal: runs.reduce((sum, r) => sum + r.sections, 0),
    boundMs: median(runs.map((r) => r.boundMs)),
    holdP50Ms: median(runs.map((r) => r.holdP50Ms)),
    rttMs: median(runs.map((r) => r.rttMs)),
    sectionP50Ms: median(sectionMs),
    sectionMaxMs: maxOf(sectionMs),
    totalMs: median(runs.map((r) => r.totalMs)),
    handoffP50Ms: median(runs.map((r) => r.handoffP50Ms)),
    failedPerSection: median(runs.map((r) => r.failedAttempts / r.sections)),
    maxFailedInSection: maxOf(runs.flatMap((r) => r.failedPerSection)),
    attempts: runs.reduce((sum, r) => sum + r.attempts, 0),
    lockstepAttempts: runs.reduce((sum, r) => sum + r.lockstepAttempts, 0),
    errors: runs.reduce((sum, r) => sum + r.errors.length, 0),
    incomplete: runs.filter((r) => !r.complete).length,
  };
}

/**
 * Runs scenario 7.
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 */
export async function runQuorum({ port, log }) {
  const { rounds, nodes, processes, settleMs } = CONFIG.quorum;
  const servers = [];
  const workers = [];
  const up = [];
  const down = [];
  try {
    for (let i = 0; i < nodes; i++) servers.push(await startServer());
    const ports = servers.map((s) => s.port);
    for (let i = 0; i < processes; i++) workers.push(new WorkerProcess(WORKER_MODULE));
    for (let round = 0; round < rounds; round++) {
      const killed = round % nodes;
      const observeIndex = (killed + 1) % nodes;
      await Promise.all(workers.map((w) => w.call("openQuorum", { ports, observeIndex, counterPort: port })));
      const base = `bench:quorum:${round}`;
      // Uncounted warm-up sections before each counted run (one per process): the first section
      // of a run otherwise pays for code not yet compiled and scripts not yet cached.
      const warmUp = (key) => runOnce(workers, { key, countKey: `${key}:n`, rttMs: 0, total: processes });
      await warmUp(`${base}:warm-up`);
      let rttMs = await pingRoundTrip(ports[observeIndex]);
      up.push({
        killed: undefined,
        ...(await runOnce(workers, { key: `${base}:up`, countKey: `${base}:up:n`, rttMs })),
      });
      await servers[killed].kill();
      await sleep(settleMs);
      await warmUp(`${base}:warm-up-down`);
      rttMs = await pingRoundTrip(ports[observeIndex]);
      down.push({ killed, ...(await runOnce(workers, { key: `${base}:down`, countKey: `${base}:down:n`, rttMs })) });
      await Promise.all(workers.map((w) => w.call("closeQuorum")));
      await servers[killed].restart();
      const over = (run) =>
        run.sectionMs.flatMap((ms, i) => (ms > run.boundMs ? [`#${i + 1} ${ms.toFixed(1)} ms`] : []));
      const [lastUp, lastDown] = [up.at(-1), down.at(-1)];
      log(
        `quorum: round ${round + 1}/${rounds} done; sections over the bound: all up ${over(lastUp).join(", ") || "none"}, one down ${over(lastDown).join(", ") || "none"}`,
      );
    }
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    for (const server of servers) await server.stop();
  }
  return {
    config: { ...CONFIG.quorum, client: "RESILIENT_CLIENT (maxRetriesPerRequest 1, reconnect every 50 ms)" },
    allUp: summarize(up),
    oneDown: summarize(down),
    runs: { allUp: up, oneDown: down },
  };
}
