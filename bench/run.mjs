/**
 * The globallock benchmark suite: `npm run bench` (builds, then runs this file).
 *
 * Starts its own redis-server on a free 127.0.0.1 port (never 6379), pins Node to CPU 0 and Redis
 * to CPU 1 when `taskset` exists, runs every scenario with the contenders interleaved, prints the
 * Markdown report and writes bench/results/latest.md, latest.json and chart.svg.
 *
 *   BENCH_QUICK=1           ~1-minute smoke run
 *   BENCH_ONLY=a,b          only these scenarios (uncontended, contended, handoff, memory, held,
 *                           quorum, semaphore, postgres, mysql, file, etcd, postgres-table,
 *                           mysql-table, sqlite, zookeeper, memcached); the report is printed but
 *                           bench/results is left alone
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { renderChart } from "./chart.mjs";
import { countClientCommands } from "./lib/command-stats.mjs";
import { CONFIG, QUICK } from "./lib/config.mjs";
import { cpuInfo, pinSelf } from "./lib/cpu.mjs";
import { connectClient } from "./lib/redis-client.mjs";
import { redisServerVersion, startServer } from "./lib/redis-server.mjs";
import { watchForStalls } from "./lib/stall-watch.mjs";
import { median, percentile } from "./lib/stats.mjs";
import { computeTargets } from "./lib/targets.mjs";
import { now } from "./lib/timing.mjs";
import { renderMarkdown } from "./report.mjs";
import { runContended } from "./scenarios/contended.mjs";
import { runEtcd } from "./scenarios/etcd.mjs";
import { runFile } from "./scenarios/file.mjs";
import { runHandoff } from "./scenarios/handoff.mjs";
import { runHeld } from "./scenarios/held.mjs";
import { runMemcached } from "./scenarios/memcached.mjs";
import { runMemory } from "./scenarios/memory.mjs";
import { runMySql } from "./scenarios/mysql.mjs";
import { runPostgres } from "./scenarios/postgres.mjs";
import { runQuorum } from "./scenarios/quorum.mjs";
import { runSemaphore } from "./scenarios/semaphore.mjs";
import { runMySqlTable, runPostgresTable, runSqlite } from "./scenarios/table.mjs";
import { runUncontended } from "./scenarios/uncontended.mjs";
import { runZooKeeper } from "./scenarios/zookeeper.mjs";

/** Every scenario, in the order they run. */
const RUNNERS = {
  uncontended: runUncontended,
  contended: runContended,
  handoff: runHandoff,
  memory: runMemory,
  held: runHeld,
  quorum: runQuorum,
  semaphore: runSemaphore,
  postgres: runPostgres,
  mysql: runMySql,
  file: runFile,
  etcd: runEtcd,
  "postgres-table": runPostgresTable,
  "mysql-table": runMySqlTable,
  sqlite: runSqlite,
  zookeeper: runZooKeeper,
  memcached: runMemcached,
};
const SCENARIOS = Object.keys(RUNNERS);
const RESULTS_DIR = fileURLToPath(new URL("./results/", import.meta.url));

const stalls = watchForStalls((line) => process.stderr.write(`bench: ${line}\n`));
const log = (line) => {
  stalls.progress();
  process.stderr.write(`bench: ${line}\n`);
};

/** Installed version of a dependency, read from its package.json. */
function versionOf(name) {
  const require = createRequire(import.meta.url);
  let dir = require.resolve(name);
  for (;;) {
    dir = dir.slice(0, dir.lastIndexOf("/"));
    try {
      const pkg = JSON.parse(readFileSync(`${dir}/package.json`, "utf8"));
      if (pkg.name === name) return pkg.version;
    } catch {
      // Keep walking up to the package root.
    }
    if (!dir.includes("/node_modules/")) return "unknown";
  }
}

/** Round-trip time of PING on `client` (ms): the unit every Redis latency here is made of. */
async function pingRoundTrip(client, count = 500) {
  const samples = [];
  for (let i = 0; i < count; i++) {
    const start = now();
    await client.ping();
    samples.push(now() - start);
  }
  return { p50Ms: median(samples), p99Ms: percentile(samples, 99) };
}

/** Scenarios selected by BENCH_ONLY (all by default). */
function selectedScenarios() {
  const only = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
  for (const name of only) if (!SCENARIOS.includes(name)) throw new Error(`BENCH_ONLY: unknown scenario ${name}`);
  return only.length === 0 ? SCENARIOS : SCENARIOS.filter((name) => only.includes(name));
}

async function main() {
  const started = now();
  const loadBefore = loadavg()[0];
  const selected = selectedScenarios();
  const pinned = pinSelf();
  countClientCommands();
  redisServerVersion(); // fails early with a clear message when redis-server is missing
  log(`${QUICK ? "quick" : "full"} run of ${selected.join(", ")}; CPU pinning ${pinned ? "on" : "off"}`);
  const server = await startServer();
  log(`redis-server pid ${server.pid} on 127.0.0.1:${server.port}`);
  const results = {};
  let redisVersion;
  let roundTrip;
  /** 1-minute load average after each scenario. */
  const loadAfter = {};
  try {
    const monitor = await connectClient(server.port);
    redisVersion = /redis_version:(\S+)/.exec(await monitor.info("server"))?.[1];
    roundTrip = await pingRoundTrip(monitor);
    const context = { port: server.port, monitor, log, tPairMs: Number.NaN };
    for (const name of selected) {
      if (name === "contended" && Number.isNaN(context.tPairMs)) {
        throw new Error("the contended scenario needs the uncontended one (t_pair)");
      }
      results[name] = await RUNNERS[name](context);
      if (name === "uncontended") context.tPairMs = results.uncontended.tPairMs;
      loadAfter[name] = loadavg()[0];
    }
    monitor.disconnect();
  } finally {
    await server.stop();
  }
  const report = {
    meta: {
      date: new Date().toISOString(),
      quick: QUICK,
      scenarios: selected,
      node: process.version,
      redis: redisVersion,
      cpu: cpuInfo(),
      pinned,
      roundTrip,
      // 1-minute load average before and after: other work on the machine makes numbers noisy.
      loadAverage: { before: loadBefore, afterScenario: loadAfter },
      versions: Object.fromEntries(
        ["ioredis", "redlock", "redis-semaphore", "async-mutex", "proper-lockfile"].map((name) => [
          name,
          versionOf(name),
        ]),
      ),
      config: CONFIG,
      totalSeconds: (now() - started) / 1000,
    },
    ...results,
  };
  report.targets = computeTargets(report);
  const markdown = renderMarkdown(report);
  process.stdout.write(markdown);
  if (selected.length === SCENARIOS.length) {
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(`${RESULTS_DIR}latest.md`, markdown);
    writeFileSync(`${RESULTS_DIR}latest.json`, `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(`${RESULTS_DIR}chart.svg`, renderChart(report));
    log("wrote bench/results/latest.md, latest.json and chart.svg");
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`bench: failed: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`);
    process.exit(1);
  },
);
