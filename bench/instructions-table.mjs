/**
 * Instructions per lock + release pair for globallock and its peers, as one table:
 * `npm run bench:instructions` (builds first), or `node bench/instructions-table.mjs [mode…]`.
 *
 * Each mode is counted by bench/instructions.mjs (callgrind, main thread, the n measured pairs
 * between two dump points after the warm-up, I / n; see there), one mode at a time: a callgrind run beside another one, or beside any
 * other busy process, counts more (replies arrive in other batches), so nothing else should run
 * meanwhile. Modes are grouped by what they are compared with: each row is given as a ratio to its
 * group's floor (a raw pair with no library: `SET NX PX` and a compare-and-delete, a bare advisory
 * lock pair; for the newer stores, the locker's own statements, requests or commands sent by hand) and to the group's fewest-instructions peer, with the store's own units (Redis
 * commands, SQL statements, file-system calls) per pair beside it.
 *
 * With no row given it counts every row of {@link GROUPS} (two to three minutes each at the
 * default 20,000 pairs; `INSTRUCTIONS_PAIRS` sets another count) and writes
 * bench/results/instructions.md and instructions.json; given rows (by id), it prints their table
 * only, or with `INSTRUCTIONS_UPDATE=1` counts them again into the saved results and rewrites both.
 * A peer that is not installed (redlock-universal, which needs Node.js 22: see
 * bench/lib/optional-peers.mjs) is skipped with a note, on stderr and under the table's header.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { missingPeer } from "./lib/optional-peers.mjs";

const INSTRUCTIONS = fileURLToPath(new URL("./instructions.mjs", import.meta.url));
const RESULTS = fileURLToPath(new URL("./results/", import.meta.url));
const PAIRS = Number(process.env.INSTRUCTIONS_PAIRS ?? 20_000);

/**
 * @typedef {{ id: string, mode: string, label: string, role: "ours" | "peer" | "floor", keys?: number }} Row
 *   `keys`: locked at once per round (bench/instructions.mjs's third argument), counted per pair.
 * @typedef {{ name: string, unit: string, rows: Row[] }} Group
 */

/**
 * A row counting `mode`; with `keys` > 1, that many keys locked at once per round. Its id is the
 * mode's name (`redis-8-keys` with 8 keys).
 * @param {string} mode @param {string} label @param {Row["role"]} role @param {number} [keys]
 * @returns {Row}
 */
function rowOf(mode, label, role, keys) {
  return keys === undefined ? { id: mode, mode, label, role } : { id: `${mode}-${keys}-keys`, mode, label, role, keys };
}

/** @type {Group[]} */
const GROUPS = [
  {
    name: "Redis lock, one node",
    unit: "Redis commands",
    rows: [
      rowOf("redis", "globallock RedisLocker", "ours"),
      rowOf("redis-noscripts", "globallock RedisLocker, scripts: false", "ours"),
      rowOf("peer-mutex", "redis-semaphore Mutex", "peer"),
      rowOf("redlock", "redlock 5 (retryCount 0)", "peer"),
      rowOf("sesame-redlock", "@sesamecare-oss/redlock (retryCount 0)", "peer"),
      rowOf("redlock-universal", "redlock-universal createLock", "peer"),
      rowOf("redis-raw", "raw SET NX PX + EVALSHA compare-and-delete", "floor"),
    ],
  },
  {
    name: "Redis lock, 8 keys at once (a tenth as many rounds, of 8 pairs each)",
    unit: "Redis commands",
    rows: [
      rowOf("redis", "globallock RedisLocker", "ours", 8),
      rowOf("peer-mutex", "redis-semaphore Mutex", "peer", 8),
    ],
  },
  {
    name: "Redis semaphore, limit 4",
    unit: "Redis commands",
    rows: [
      rowOf("redis-semaphore", "globallock RedisSemaphore", "ours"),
      rowOf("peer-semaphore", "redis-semaphore Semaphore", "peer"),
    ],
  },
  {
    name: "PostgreSQL",
    unit: "statements",
    rows: [
      rowOf("postgres", "globallock PostgresLocker", "ours"),
      rowOf("postgres-raw", "raw pg_try_advisory_lock / pg_advisory_unlock", "floor"),
    ],
  },
  {
    name: "PostgreSQL lease table",
    unit: "statements",
    rows: [
      rowOf("postgres-table", "globallock PostgresTableLocker", "ours"),
      rowOf("postgres-table-raw", "raw floor: its statements by hand on the same pool", "floor"),
    ],
  },
  {
    name: "MySQL lease table (MariaDB)",
    unit: "statements",
    rows: [
      rowOf("mysql-table", "globallock MySqlTableLocker", "ours"),
      rowOf("mysql-table-raw", "raw floor: its statements by hand on the same pool", "floor"),
    ],
  },
  {
    name: "SQLite lease table",
    unit: "statements",
    rows: [
      rowOf("sqlite", "globallock SqliteLocker", "ours"),
      rowOf("sqlite-raw", "raw floor: its statements by hand on the same Database", "floor"),
    ],
  },
  {
    name: "ZooKeeper",
    unit: "requests",
    rows: [
      rowOf("zookeeper", "globallock ZooKeeperLocker", "ours"),
      rowOf("zookeeper-raw", "raw floor: create ephemeral sequential + getChildren, delete", "floor"),
    ],
  },
  {
    name: "Memcached",
    unit: "commands",
    rows: [
      rowOf("memcached", "globallock MemcachedLocker", "ours"),
      rowOf("memcached-raw", "raw floor: add, then gets + cas stored expired", "floor"),
    ],
  },
  {
    name: "Lock files",
    unit: "file-system calls",
    rows: [
      rowOf("file", "globallock FileLocker", "ours"),
      rowOf("proper-lockfile", "proper-lockfile", "peer"),
      rowOf("file-raw", "raw floor: FileLocker's 4 calls through the thread pool", "floor"),
    ],
  },
  {
    name: "In process",
    unit: "",
    rows: [rowOf("memory", "globallock MemoryLocker", "ours"), rowOf("async-mutex", "async-mutex Mutex", "peer")],
  },
];

/** Counts one row's mode (a child process: bench/instructions.mjs); its JSON line. */
function count(row) {
  const keys = row.keys ?? 1;
  // Rounds of several keys: a tenth of the rounds (each round is `keys` pairs).
  const rounds = keys === 1 ? PAIRS : Math.ceil(PAIRS / 10);
  const output = execFileSync(process.execPath, [INSTRUCTIONS, row.mode, String(rounds), String(keys)], {
    encoding: "utf8",
    maxBuffer: 16 * 1024 * 1024,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = output.trim().split("\n").at(-1) ?? "";
  return JSON.parse(line);
}

/**
 * The store's units per pair in a count: commands, statements, requests or file-system calls
 * (`statementsPerPair`: PostgreSQL's, in results saved before every store's were `operationsPerPair`).
 */
function unitsOf(result) {
  return result.commandsPerPair ?? result.operationsPerPair ?? result.statementsPerPair ?? result.fsCallsPerPair;
}

const ratio = (value, base) => (base === undefined || base === 0 ? "" : `${(value / base).toFixed(2)}×`);
const thousands = (value) => `${(value / 1000).toFixed(1)}k`;

/** The Markdown table of `groups` from `results` (mode → count); rows not counted are left out. */
function render(groups, results) {
  const lines = [
    "| pair | instructions per pair | × floor | × best peer | store operations per pair |",
    "| :--- | ---: | ---: | ---: | :--- |",
  ];
  for (const group of groups) {
    const counted = group.rows.filter((row) => results.has(row.id));
    if (counted.length === 0) continue;
    const perPair = (row) => results.get(row.id).perPair;
    const floor = counted.find((row) => row.role === "floor");
    const peers = counted.filter((row) => row.role === "peer");
    const bestPeer = peers.length === 0 ? undefined : Math.min(...peers.map(perPair));
    lines.push(`| **${group.name}** | | | | |`);
    for (const row of counted) {
      const result = results.get(row.id);
      const units = unitsOf(result);
      lines.push(
        `| ${row.label} (\`${row.id}\`) | ${thousands(result.perPair)} | ${
          floor === undefined ? "" : ratio(result.perPair, perPair(floor))
        } | ${row.role === "floor" ? "" : ratio(result.perPair, bestPeer)} | ${
          units === undefined || group.unit === "" ? "" : `${units} ${group.unit}`
        } |`,
      );
    }
  }
  return lines.join("\n");
}

const chosen = process.argv.slice(2);
const all = GROUPS.flatMap((group) => group.rows);
for (const id of chosen) {
  if (!all.some((row) => row.id === id))
    throw new Error(`unknown row ${id}: one of ${all.map((row) => row.id).join(", ")}`);
}
const rows = chosen.length === 0 ? all : all.filter((row) => chosen.includes(row.id));
/** With `INSTRUCTIONS_UPDATE=1`, the chosen rows are counted again into the saved results. */
const updating = chosen.length > 0 && process.env.INSTRUCTIONS_UPDATE === "1";
const jsonFile = new URL("instructions.json", `file://${RESULTS}`);
/** @type {{ runs: { startedAt: string, minutes: number, pairs: number, loadBefore: number, loadAfter: number, rows: string[] }[], results: Record<string, unknown> }} */
const saved = updating ? JSON.parse(readFileSync(jsonFile, "utf8")) : { runs: [], results: {} };
const results = new Map(Object.entries(saved.results));
const startedAt = new Date();
const loadBefore = loadavg()[0];
/** Rows skipped because their peer is not installed: id → the note. */
const skipped = new Map();
for (const row of rows) {
  const missing = missingPeer(row.mode);
  if (missing !== undefined) {
    process.stderr.write(`instructions: skipped ${row.id}: ${missing}\n`);
    skipped.set(row.id, missing);
    continue;
  }
  process.stderr.write(`instructions: ${row.id}…\n`);
  results.set(row.id, count(row));
}
const run = {
  startedAt: startedAt.toISOString(),
  minutes: Math.round((Date.now() - startedAt.getTime()) / 60_000),
  pairs: PAIRS,
  loadBefore: Math.round(loadBefore * 10) / 10,
  loadAfter: Math.round(loadavg()[0] * 10) / 10,
  rows: rows.map((row) => row.id).filter((id) => !skipped.has(id)),
};
const runs = [...saved.runs, run];
const table = render(GROUPS, results);
const header = [
  `Instructions per lock + release pair, counted by callgrind: main thread, the n pairs measured between two dump points after the warm-up, I / n,`,
  "one mode at a time (a run with keys locked at once counts a tenth as many rounds, of that many pairs each).",
  "",
  ...runs.map(
    (r) =>
      `- ${r.startedAt.slice(0, 16).replace("T", " ")} UTC, ${r.minutes} minutes, n = ${r.pairs}, load average ${r.loadBefore} before and ${r.loadAfter} after: ${r.rows.join(", ")}`,
  ),
  ...[...skipped.values()].map((note) => `- not counted: ${note}`),
].join("\n");
console.log(`${header}\n\n${table}`);
if (chosen.length === 0 || updating) {
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(new URL("instructions.md", `file://${RESULTS}`), `# Instructions per pair\n\n${header}\n\n${table}\n`);
  writeFileSync(jsonFile, `${JSON.stringify({ runs, results: Object.fromEntries(results) }, null, 2)}\n`);
}
