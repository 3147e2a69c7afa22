/**
 * Renders the benchmark results as Markdown: a header with the machine, then one table per
 * scenario with a short note on how to read it.
 */
import { breakdown, int, num, percent, ratio, table } from "./lib/format.mjs";
import { renderEtcd } from "./scenarios/etcd.mjs";
import { renderFile } from "./scenarios/file.mjs";
import { renderMemcached } from "./scenarios/memcached.mjs";
import { renderMySql } from "./scenarios/mysql.mjs";
import { renderPostgres } from "./scenarios/postgres.mjs";
import { renderTable } from "./scenarios/table.mjs";
import { renderZooKeeper } from "./scenarios/zookeeper.mjs";

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

function targets(list) {
  return [
    "## Targets",
    "",
    "Each target checked against this run's numbers (details in the sections below).",
    "",
    table(
      ["target", "goal", "measured", ""],
      list.map((t) => [t.what, t.goal, t.measured, t.pass ? "✓" : "✗"]),
      ["l", "l", "l", "l"],
    ),
  ].join("\n");
}

/** The uncontended table (ops/s, ratio to the floor, pair times, CPU, commands) of `results`. */
function uncontendedTable(results) {
  const rows = results.map((r) => [
    r.label,
    int(r.seqOpsPerSec),
    ratio(r.seqRatio),
    num(r.seqPairP50Ms * 1000),
    num(r.seqPairP99Ms * 1000),
    int(r.seqCpuUsPerOp),
    int(r.seqRedisCpuUsPerOp),
    int(r.concOpsPerSec),
    ratio(r.concRatio),
    int(r.concCpuUsPerOp),
    int(r.concRedisCpuUsPerOp),
    num(r.commandsPerOp),
  ]);
  return table(
    [
      "contender",
      "sequential ops/s",
      "× raw",
      "pair p50 (µs)",
      "pair p99 (µs)",
      "Node CPU µs/op",
      "Redis CPU µs/op",
      "8 keys ops/s",
      "× raw",
      "Node CPU µs/op",
      "Redis CPU µs/op",
      "Redis cmds/op",
    ],
    rows,
  );
}

/** The commands per acquire + release of `results`, top-level and inside scripts. */
function commandsTable(results) {
  return table(
    ["contender", "executed per op", "top-level (sent)", "inner (inside scripts)"],
    results.map((r) => [
      r.label,
      num(r.commandsPerOp),
      `${num(r.topLevelPerOp)}: ${breakdown(r.topLevelBreakdown)}`,
      r.innerPerOp > 0 ? `${num(r.innerPerOp)}: ${breakdown(r.innerBreakdown)}` : "0",
    ]),
    ["l", "r", "l", "l"],
  );
}

/** How to read the uncontended table, for `config` ({ concurrency, rounds, durationMs }). */
function uncontendedNote(config) {
  return `Sequential: one loop on one key. 8 keys: ${config.concurrency} concurrent loops on ${config.concurrency} keys sharing one connection. Medians of ${config.rounds} interleaved rounds of ${config.durationMs} ms; "× raw" is the median of the per-round ratios to the raw floor. CPU per op: Node (process.cpuUsage, this process on CPU 0) and redis-server (INFO cpu, used_cpu_user + used_cpu_sys, on CPU 1), over each loop.`;
}

function uncontended(s) {
  return [
    "## 1–2. Uncontended acquire + release (Redis)",
    "",
    uncontendedNote(s.config),
    "",
    uncontendedTable(s.results),
    "",
    "Redis commands per acquire + release (sequential loop, pooled over rounds): every command Redis executed (INFO commandstats deltas, which count the commands run inside Lua scripts), split into top-level ones (requests the client sent, counted on the client side; EVALSHA is a script call) and inner ones (run inside those scripts: executed − sent).",
    "",
    commandsTable(s.results),
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

/** The hand-off table of `results`: reps, p50/p99 and their ratios to the raw direct grant's. */
function handoffTable(results) {
  return table(
    [
      "contender",
      "reps",
      "gave up",
      "p50 (ms)",
      "p99 (ms)",
      "p50 × grant",
      "p99 × grant",
      "mean (ms)",
      "min (ms)",
      "max (ms)",
    ],
    results.map((r) => [
      r.label,
      r.reps,
      r.failures,
      num(r.p50Ms),
      num(r.p99Ms),
      ratio(r.p50VsGrant),
      ratio(r.p99VsGrant),
      num(r.meanMs),
      num(r.minMs),
      num(r.maxMs),
    ]),
  );
}

function handoff(s) {
  return [
    "## 4. Hand-off latency (Redis)",
    "",
    `A holds the key, B is blocked in lock(); latency = B's lock resolving − A calling release (includes A's release round trip). A releases 3–12 ms after B called lock. B in the same process flatters pollers (A's release timer and B's retry timer fire in the same event-loop turn); B in another process is the realistic figure. Samples pooled over ${s.config.rounds} interleaved rounds. Cross-process clock check: offset ${num(s.clockOffsetMs * 1000)} µs (IPC ping RTT ${num(s.clockPingRttMs * 1000)} µs).`,
    "",
    `The raw floors (bench/lib/raw-direct-grant.mjs): **direct grant** — a blocked waiter's token is queued (RPUSH) in the script that found the key taken; the release script pops it, SETs the key to it with the TTL and PUBLISHes to the waiter's own channel, which the waiter takes as ownership (one round trip: the release); **wake then claim** — the release deletes and PUBLISHes on the key's channel, the waiter claims with SET NX (two round trips). "× grant" = this p50 (p99) ÷ the direct grant's p50 (p99) with B on the same side, pooled samples of this run.`,
    "",
    handoffTable(s.results),
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

function held(s) {
  const c = s.config;
  const stateLabel = (n) => (n === 0 ? "none" : int(n));
  const sw = s.sweep;
  return [
    "## 6. Held locks: speed at scale (Redis)",
    "",
    `One RedisLocker (expiry ${int(c.expiryMs)} ms, its lease keeper extending every held lock) holds none, then ${c.sizes.map(int).join(", then ")} locks taken with lock on distinct keys (release functions kept); in each state, uncontended acquire + release on other keys of the same locker: sequential, and ${c.concurrency} keys at once. ${c.cycles} cycle(s) of none → ${c.sizes.map(int).join(" → ")} → extension round → release all; per state ${c.subRounds} sub-round(s) of ${c.durationMs} ms per loop, globallock and the raw control alternating. "÷ none" = rate with N held ÷ rate with none held at the start of the same cycle, median over cycles. The raw floor (own connection, same process) is a control: a drop it shares comes from the environment (a bigger heap to collect, more keys in Redis), not from the locker. CPU per op: Node (process.cpuUsage) and redis-server (INFO cpu) over each loop.`,
    "",
    table(
      [
        "contender",
        "held",
        "sequential ops/s",
        "÷ none",
        "Node CPU µs/op",
        "Redis CPU µs/op",
        "8 keys ops/s",
        "÷ none",
        "Node CPU µs/op",
        "Redis CPU µs/op",
      ],
      s.rows.map((r) => [
        r.label,
        stateLabel(r.held),
        int(r.seqOpsPerSec),
        num(r.seqRatio, 3),
        int(r.seqNodeCpuUsPerOp),
        int(r.seqRedisCpuUsPerOp),
        int(r.concOpsPerSec),
        num(r.concRatio, 3),
        int(r.concNodeCpuUsPerOp),
        int(r.concRedisCpuUsPerOp),
      ]),
    ),
    "",
    `Memory: V8 heapUsed after forced full collections (gc() twice), with N held minus with none held (same cycle), ÷ N; the array holding the release functions is allocated before the baseline. Outside the heap: process.memoryUsage().external the same way. After releasing all: heapUsed minus the none-held baseline (${num(s.retainedAfterReleaseBytes / 1024)} KiB, median over cycles). Fill: concurrent lock, ${c.fillConcurrency} in flight; release of all: ${int(s.releasePerSec)}/s.`,
    "",
    table(
      ["held", "fill (ms)", "lock/s", "heap per held lock (B)", "outside heap per lock (B)"],
      s.memory.map((m) => [
        int(m.held),
        int(m.fillMs),
        int(m.fillPerSec),
        num(m.heapBytesPerLock),
        num(m.externalBytesPerLock),
      ]),
    ),
    "",
    `Extension rounds of all ${int(sw.locks)} held locks, on the keeper's own schedule at the ${int(c.expiryMs)} ms expiry, observed once the rate loops were done (the process otherwise idle) on the locker's client: the first round after the fill, then ${int(c.steadyRounds ?? 0)} more per cycle (each half the expiry later: what a process holding the locks pays every half expiry). Commands separated by 50 ms of quiet form a burst (the keeper extends leases taken close together in one burst, so a round may be several); a round is complete when its bursts extended every held lock (leaseStats.extensions). Wall = Σ over bursts of "in flight" (first extension command sent → last reply) + "pre-send" (the keeper's synchronous work before a burst's first command — collecting due leases, building batches — dated by a 2 ms heartbeat timer that runs while a round is observed: last tick → first command, so it includes up to 2 ms of idle time per burst); Node CPU = process.cpuUsage over the same intervals (every thread: the main one, and V8's and libuv's helpers, which do a major collection's parallel marking), and the main thread's alone (Linux schedstat). Medians over the complete rounds.`,
    "",
    table(
      [
        "round",
        "locks",
        "observed",
        "bursts",
        "commands",
        "wall (ms)",
        "in flight (ms)",
        "pre-send (ms)",
        "Node CPU (ms)",
        "main thread CPU (ms)",
        "worst wall / CPU (ms)",
        "errors",
      ],
      [
        ["first after the fill", sw],
        ["next", sw.steady],
      ]
        .filter(([, r]) => r !== undefined && r.of > 0)
        .map(([label, r]) => [
          label,
          int(r.locks),
          `${r.observed} / ${r.of}`,
          num(r.bursts),
          int(r.commands),
          num(r.wallMs),
          num(r.spanMs),
          num(r.preSendMs),
          num(r.cpuMs),
          num(r.mainCpuMs),
          `${num(r.worstWallMs)} / ${num(r.worstCpuMs)}`,
          num(r.errors),
        ]),
    ),
    "",
    `Locks lost over the scenario: ${int(s.lost)}.`,
    ...(sw.floor === undefined
      ? []
      : [
          "",
          `Its floor, after the rounds of each cycle: the same ${int(sw.locks)} keys' worth extended from a bare ioredis client (bench/lib/raw-extension-round.mjs: per key GET, compare, PEXPIRE, in one Lua script per 256 keys, at most 256 in flight — the keeper's batches without its bookkeeping): wall ${num(sw.floor.wallMs)} ms, Node CPU ${num(sw.floor.nodeCpuMs)} ms, redis-server CPU ${num(sw.floor.redisCpuMs)} ms (medians of ${sw.floor.rounds}). Redis's part is what no client can save: the round's wall time is bounded below by it.`,
        ]),
  ].join("\n");
}

function quorum(s) {
  const c = s.config;
  const row = (label, q) => [
    label,
    `${q.roundsAllWithinBound} / ${q.rounds}`,
    `${q.sectionsWithinBound} / ${q.sectionsTotal}`,
    num(q.sectionP50Ms),
    num(q.sectionMaxMs),
    num(q.boundMs),
    num(q.totalMs),
    num(q.handoffP50Ms),
    num(q.failedPerSection),
    num(q.maxFailedInSection),
    `${q.lockstepAttempts} / ${q.attempts}`,
    num(q.errors),
  ];
  return [
    "## 7. Quorum contention with a node down (Redis)",
    "",
    `${c.nodes} independent redis-servers; ${c.processes} forked processes, each with one RedisLocker over all ${c.nodes} (client settings: ${c.client}), contend on one key for ${c.sections} critical sections in total, each a setTimeout(${c.holdMs}) hold. Per round: a run with every node up (control), then one node SIGKILLed and, ${c.settleMs} ms later, a run with ${c.nodes - 1} of ${c.nodes}; the node is restarted before the next round (a different node each round). Each counted run follows an uncounted warm-up run of one section per process on another key. Section time = previous section's release resolved (the first: the start) → this section's release resolved. Bound = 3 × (hold + 1 RTT), with the run's median hold (p50 ${num(s.oneDown.holdP50Ms)} ms) and the median PING round trip to a live node (${num(s.oneDown.rttMs * 1000)} µs). Hand-off = release called → next lock obtained. Attempts = the acquire script's EVALSHA as sent on one live node's client by each process while waiting in lock(); failed per section = attempts between the previous grant and this one, minus the winning one; lock-step = attempts landing within 1 ms of another process's attempt. Medians over ${c.rounds} round(s); "worst" over all.`,
    "",
    table(
      [
        "nodes",
        "rounds all within bound",
        "sections within bound",
        "section p50 (ms)",
        "worst section (ms)",
        "bound (ms)",
        "total (ms)",
        "hand-off p50 (ms)",
        "failed attempts / section",
        "most failed in a section",
        "lock-step attempts",
        "errors",
      ],
      [row(`${c.nodes} of ${c.nodes} up`, s.allUp), row(`${c.nodes - 1} of ${c.nodes} up (one SIGKILLed)`, s.oneDown)],
    ),
  ].join("\n");
}

function semaphore(s) {
  const u = s.uncontended;
  const c = s.contended.config;
  const h = s.handoff;
  const holdP50 = s.contended.inProcess.find((r) => r.id === "globallock-own")?.holdP50Ms;
  return [
    `## 8. Semaphores: limit ${s.limit} (Redis)`,
    "",
    `globallock's RedisSemaphore against redis-semaphore's Semaphore (one instance per acquisition, as its README does; retryInterval 1 ms instead of its default 10 ms), both with ${s.limit} permits per key and one permit per acquisition (\`lock\` / \`acquire()\`), default options otherwise.`,
    "",
    "### Uncontended acquire + release",
    "",
    `${uncontendedNote(u.config)} The raw floor runs in the same rounds.`,
    "",
    uncontendedTable(u.results),
    "",
    commandsTable(u.results),
    "",
    `### Contended: ${c.workers} workers, one key, limit ${c.limit}`,
    "",
    `Each critical section is \`setTimeout(${c.holdMs})\` (measured hold p50 ≈ ${num(holdP50)} ms). ${c.warmupMs} ms warm-up, then a ${c.durationMs} ms window; medians of ${c.rounds} interleaved round(s). "of limit" = CS/s ÷ (${c.limit} × 1000 / (hold p50 + t_pair)), with t_pair = RedisSemaphore's median uncontended acquire + release above (${num(c.tPairMs * 1000)} µs): ${c.limit} permits, each handed over in one acquire + release. Jain = fairness over the ${c.workers} workers (1 = even). Other columns as in scenario 3.`,
    "",
    "One process:",
    "",
    contendedTable(s.contended.inProcess),
    "",
    `${c.processes} processes × ${c.workers / c.processes} workers:`,
    "",
    contendedTable(s.contended.twoProcesses),
    "",
    "### Hand-off latency",
    "",
    `As scenario 4, with the key's other ${s.limit - 1} permits held throughout (by a third session of the same library), so that B waits for A's permit. The raw direct grant is a mutex hand-off (one round trip), the floor. Samples pooled over ${h.config.rounds} interleaved rounds; cross-process clock offset ${num(h.clockOffsetMs * 1000)} µs (IPC ping RTT ${num(h.clockPingRttMs * 1000)} µs).`,
    "",
    handoffTable(h.results),
  ].join("\n");
}

/**
 * The whole report.
 * @param {object} results as assembled by bench/run.mjs
 * @returns {string}
 */
export function renderMarkdown(results) {
  const sections = [header(results.meta)];
  if (results.targets?.length > 0) sections.push(targets(results.targets));
  if (results.uncontended) sections.push(uncontended(results.uncontended));
  if (results.contended) sections.push(contended(results.contended));
  if (results.handoff) sections.push(handoff(results.handoff));
  if (results.memory) sections.push(memory(results.memory));
  if (results.held) sections.push(held(results.held));
  if (results.quorum) sections.push(quorum(results.quorum));
  if (results.semaphore) sections.push(semaphore(results.semaphore));
  if (results.postgres) sections.push(renderPostgres(results.postgres));
  if (results.mysql) sections.push(renderMySql(results.mysql));
  if (results.file) sections.push(renderFile(results.file));
  if (results.etcd) sections.push(renderEtcd(results.etcd));
  if (results["postgres-table"]) sections.push(renderTable(results["postgres-table"], "13a. PostgresTableLocker"));
  if (results["mysql-table"]) sections.push(renderTable(results["mysql-table"], "13b. MySqlTableLocker"));
  if (results.sqlite) sections.push(renderTable(results.sqlite, "13c. SqliteLocker"));
  if (results.zookeeper) sections.push(renderZooKeeper(results.zookeeper));
  if (results.memcached) sections.push(renderMemcached(results.memcached));
  return `${sections.join("\n\n")}\n`;
}
