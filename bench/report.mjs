/**
 * Renders the benchmark results as Markdown: a header with the machine, then one table per
 * scenario with a short note on how to read it.
 */
import { breakdown, int, num, percent, ratio, table } from "./lib/format.mjs";

function header(meta) {
  const pinning = meta.pinned
    ? "yes — Node processes on CPU 0, redis-server on CPU 1 (taskset)"
    : "no (taskset missing or fewer than 2 CPUs)";
  return [
    `# globallock benchmark (${meta.quick ? "BENCH_QUICK smoke run" : "full run"})`,
    "",
    `- date: ${meta.date}`,
    `- Node.js ${meta.node}, redis-server ${meta.redis} (own process on a free 127.0.0.1 port, no persistence)`,
    `- CPU: ${meta.cpu.model} × ${meta.cpu.count}`,
    `- CPU pinning: ${pinning}`,
    `- Redis round trip (PING from Node): p50 ${num(meta.roundTrip.p50Ms * 1000)} µs, p99 ${num(meta.roundTrip.p99Ms * 1000)} µs`,
    `- ioredis ${meta.versions.ioredis}, redlock ${meta.versions.redlock}, redis-semaphore ${meta.versions["redis-semaphore"]}, async-mutex ${meta.versions["async-mutex"]}`,
    `- 1-minute load average: ${num(meta.loadAverage.before, 2)} before; after ${Object.entries(
      meta.loadAverage.afterScenario,
    )
      .map(([name, load]) => `${name} ${num(load, 2)}`)
      .join(
        ", ",
      )} (the benchmark mostly waits on I/O and keeps this near or below 1; well above 1 means other work competed for the CPUs and the numbers are noisier)`,
    `- total time: ${num(meta.totalSeconds)} s`,
  ].join("\n");
}

function uncontended(s) {
  const rows = s.results.map((r) => [
    r.label,
    int(r.seqOpsPerSec),
    ratio(r.seqRatio),
    num(r.seqPairP50Ms * 1000),
    num(r.seqPairP99Ms * 1000),
    int(r.seqCpuUsPerOp),
    int(r.concOpsPerSec),
    ratio(r.concRatio),
    int(r.concCpuUsPerOp),
  ]);
  return [
    "## 1–2. Uncontended acquire + release (Redis)",
    "",
    `Sequential: one loop on one key. 8 keys: ${s.config.concurrency} concurrent loops on ${s.config.concurrency} keys sharing one connection. Medians of ${s.config.rounds} interleaved rounds of ${s.config.durationMs} ms; "× raw" is the median of the per-round ratios to the raw floor.`,
    "",
    table(
      [
        "contender",
        "sequential ops/s",
        "× raw",
        "pair p50 (µs)",
        "pair p99 (µs)",
        "Node CPU µs/op",
        "8 keys ops/s",
        "× raw",
        "Node CPU µs/op",
      ],
      rows,
    ),
    "",
    `t_pair (globallock's median sequential acquire + release) = ${num(s.tPairMs * 1000)} µs, used for the contended limit below.`,
  ].join("\n");
}

function contendedTable(rows) {
  return table(
    [
      "contender",
      "CS/s",
      "of limit",
      "wait p50 (ms)",
      "wait p99 (ms)",
      "starved workers",
      "max/min per worker",
      "Jain",
      "gave up",
      "Redis cmds/CS",
      "sent cmds/CS",
      "Node CPU µs/CS",
      "Redis CPU µs/CS",
    ],
    rows.map((r) => [
      r.label + (r.allDrained ? "" : " (†)"),
      int(r.csPerSec),
      percent(r.fractionOfLimit),
      num(r.waitP50Ms),
      num(r.waitP99Ms),
      num(r.starved),
      num(r.maxOverMin, 2),
      num(r.jain, 3),
      num(r.failures),
      num(r.serverCmdsPerCs),
      num(r.clientCmdsPerCs),
      int(r.nodeCpuUsPerCs),
      int(r.redisCpuUsPerCs),
    ]),
  );
}

function breakdownTable(rows) {
  return table(
    ["contender", "executed by Redis, per CS (INFO commandstats)", "sent by clients, per CS"],
    rows.map((r) => [r.label, breakdown(r.serverBreakdown), breakdown(r.clientBreakdown)]),
    ["l", "l", "l"],
  );
}

function contended(s) {
  const c = s.config;
  const limit = s.inProcess.find((r) => r.id === "globallock-own");
  return [
    "## 3. Contended: 8 workers, one key, ~1 ms hold (Redis)",
    "",
    `Each critical section is \`setTimeout(${c.holdMs})\` (event loop free; measured hold p50 ≈ ${num(limit.holdP50Ms)} ms). ${c.warmupMs} ms warm-up, then a ${c.durationMs} ms window; medians of ${c.rounds} interleaved rounds. "of limit" = CS/s ÷ 1000 / (hold p50 + t_pair), with t_pair = ${num(c.tPairMs * 1000)} µs (limit ≈ ${int(limit.limitPerSec)} CS/s). Wait = lock call → lock obtained. "Redis cmds/CS" counts every command Redis executed (INFO commandstats, including those inside Lua scripts); "sent cmds/CS" counts requests the clients sent. Starved = workers that completed nothing in the window; max/min = ∞ then. CPU per CS: Node (all benchmark processes, on CPU 0) and redis-server (on CPU 1), over the window. (†) = some worker was still blocked ${num(c.drainMs / 1000)} s after the window.`,
    "",
    "### (a) one process",
    "",
    contendedTable(s.inProcess),
    "",
    `### (b) ${c.processes} processes × ${c.workers / c.processes} workers`,
    "",
    contendedTable(s.twoProcesses),
    "",
    "### Commands per critical section, by command",
    "",
    "One process:",
    "",
    breakdownTable(s.inProcess),
    "",
    `${c.processes} processes:`,
    "",
    breakdownTable(s.twoProcesses),
  ].join("\n");
}

function handoff(s) {
  return [
    "## 4. Hand-off latency (Redis)",
    "",
    `A holds the key, B is blocked in lock(); latency = B's lock resolving − A calling release (includes A's release round trip). A releases 3–12 ms after B called lock. B in the same process flatters pollers (A's release timer and B's retry timer fire in the same event-loop turn); B in another process is the realistic figure. Samples pooled over ${s.config.rounds} interleaved rounds. Cross-process clock check: offset ${num(s.clockOffsetMs * 1000)} µs (IPC ping RTT ${num(s.clockPingRttMs * 1000)} µs).`,
    "",
    table(
      ["contender", "reps", "gave up", "p50 (ms)", "p99 (ms)", "mean (ms)", "min (ms)", "max (ms)"],
      s.results.map((r) => [
        r.label,
        r.reps,
        r.failures,
        num(r.p50Ms),
        num(r.p99Ms),
        num(r.meanMs),
        num(r.minMs),
        num(r.maxMs),
      ]),
    ),
  ].join("\n");
}

function memory(s) {
  return [
    "## 5. In-process locks",
    "",
    `Uncontended: lock + release on one key. 8 waiters: ${s.config.workers} workers on one key for ${s.config.throughputMs} ms, each holding across one event-loop turn (\`await setImmediate()\`, no work) and re-locking at once; completions per worker show starvation. Hand-off: A holds 1–3 ms while B waits; latency from A's release call to B's lock resolving. Medians of ${s.config.rounds} interleaved rounds.`,
    "",
    table(
      [
        "locker",
        "uncontended ops/s",
        "8 waiters: hand-offs/s",
        "min / max per worker",
        "max/min",
        "Jain",
        "hand-off p50 (µs)",
        "hand-off p99 (µs)",
      ],
      s.results.map((r) => [
        r.label,
        int(r.uncontendedOpsPerSec),
        int(r.handoffsPerSec),
        `${int(r.minCompletions)} / ${int(r.maxCompletions)}`,
        num(r.maxOverMin, 2),
        num(r.jain, 3),
        num(r.handoffP50Us),
        num(r.handoffP99Us),
      ]),
    ),
  ].join("\n");
}

function sweeper(s) {
  const c = s.config;
  return [
    "## 6. Sweeper (auto-extension)",
    "",
    `One RedisLocker holding N locks with expiry ${c.expiryMs} ms (sweep every ${c.intervalMs} ms, default sweepConcurrency 256). Duration: first command of the sweep sent → last reply (observed on the locker's client); CPU: process.cpuUsage over the same window (Node only; Redis runs on its own CPU). The first sweep of each size runs partly cold (JIT warm-up, NOSCRIPT fallbacks); later sweeps, CPU, rate and commands are medians of sweeps 2–${c.sweeps}. Target: 10,000 locks within expiry/10 at the default 30 s expiry = ${int(c.targetMs)} ms.`,
    "",
    table(
      [
        "locks",
        "sweeps",
        "fill (ms)",
        "first sweep (ms)",
        "later sweeps (ms)",
        "CPU per sweep (ms)",
        "extensions/s",
        "commands per lock",
        `< ${int(c.targetMs)} ms`,
        "lost",
      ],
      s.results.map((r) => [
        int(r.size),
        r.sweepsObserved,
        int(r.fillMs),
        num(r.firstSweepMs),
        num(r.durationMs),
        num(r.cpuMs),
        int(r.extensionsPerSec),
        num(r.commandsPerLock),
        r.withinTarget ? "yes" : "**no**",
        r.lost,
      ]),
    ),
  ].join("\n");
}

/**
 * The whole report.
 * @param {object} results as assembled by bench/run.mjs
 * @returns {string}
 */
export function renderMarkdown(results) {
  const sections = [header(results.meta)];
  if (results.uncontended) sections.push(uncontended(results.uncontended));
  if (results.contended) sections.push(contended(results.contended));
  if (results.handoff) sections.push(handoff(results.handoff));
  if (results.memory) sections.push(memory(results.memory));
  if (results.sweeper) sections.push(sweeper(results.sweeper));
  return `${sections.join("\n\n")}\n`;
}
