/**
 * Instructions per lock + release pair for globallock and its peers, as one table:
 * `npm run bench:instructions` (builds first), or `node bench/instructions-table.mjs [mode…]`.
 *
 * Each mode is counted by bench/instructions.mjs (callgrind, main thread, (I(2n) − I(n)) / n after
 * the warm-up; see there), one mode at a time: a callgrind run beside another one, or beside any
 * other busy process, counts more (replies arrive in other batches), so nothing else should run
 * meanwhile. Modes are grouped by what they are compared with: each row is given as a ratio to its
 * group's floor (a raw pair with no library: `SET NX PX` and a compare-and-delete, a bare advisory
 * lock pair) and to the group's fewest-instructions peer, with the store's own units (Redis
 * commands, SQL statements, file-system calls) per pair beside it.
 *
 * With no mode given it counts every mode of {@link GROUPS} (about three minutes each at the
 * default 20,000 pairs; `INSTRUCTIONS_PAIRS` sets another count) and writes
 * bench/results/instructions.md and instructions.json; with modes, it prints their table only.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";

const INSTRUCTIONS = fileURLToPath(new URL("./instructions.mjs", import.meta.url));
const RESULTS = fileURLToPath(new URL("./results/", import.meta.url));
const PAIRS = Number(process.env.INSTRUCTIONS_PAIRS ?? 20_000);

/**
 * @typedef {{ mode: string, label: string, role: "ours" | "peer" | "floor" }} Row
 * @typedef {{ name: string, unit: string, rows: Row[] }} Group
 */

/** @type {Group[]} */
const GROUPS = [
  {
    name: "Redis lock, one node",
    unit: "Redis commands",
    rows: [
      { mode: "redis", label: "globallock RedisLocker", role: "ours" },
      { mode: "peer-mutex", label: "redis-semaphore Mutex", role: "peer" },
      { mode: "redlock", label: "redlock 5 (retryCount 0)", role: "peer" },
      { mode: "sesame-redlock", label: "@sesamecare-oss/redlock (retryCount 0)", role: "peer" },
      { mode: "redlock-universal", label: "redlock-universal createLock", role: "peer" },
      { mode: "redis-raw", label: "raw SET NX PX + EVALSHA compare-and-delete", role: "floor" },
    ],
  },
  {
    name: "Redis semaphore, limit 4",
    unit: "Redis commands",
    rows: [
      { mode: "redis-semaphore", label: "globallock RedisSemaphore", role: "ours" },
      { mode: "peer-semaphore", label: "redis-semaphore Semaphore", role: "peer" },
    ],
  },
  {
    name: "PostgreSQL",
    unit: "statements",
    rows: [
      { mode: "postgres", label: "globallock PostgresLocker", role: "ours" },
      { mode: "postgres-raw", label: "raw pg_try_advisory_lock / pg_advisory_unlock", role: "floor" },
    ],
  },
  {
    name: "Lock files",
    unit: "file-system calls",
    rows: [
      { mode: "file", label: "globallock FileLocker", role: "ours" },
      { mode: "proper-lockfile", label: "proper-lockfile", role: "peer" },
    ],
  },
  {
    name: "In process",
    unit: "",
    rows: [
      { mode: "memory", label: "globallock MemoryLocker", role: "ours" },
      { mode: "async-mutex", label: "async-mutex Mutex", role: "peer" },
    ],
  },
];

/** Counts one mode (a child process: bench/instructions.mjs); its JSON line. */
function count(mode) {
  const output = execFileSync(process.execPath, [INSTRUCTIONS, mode, String(PAIRS)], {
    encoding: "utf8",
    maxBuffer: 16 * 1024 * 1024,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = output.trim().split("\n").at(-1) ?? "";
  return JSON.parse(line);
}

/** The store's units per pair in a count: commands, statements or file-system calls. */
function unitsOf(result) {
  return result.commandsPerPair ?? result.statementsPerPair ?? result.fsCallsPerPair;
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
    const counted = group.rows.filter((row) => results.has(row.mode));
    if (counted.length === 0) continue;
    const perPair = (row) => results.get(row.mode).perPair;
    const floor = counted.find((row) => row.role === "floor");
    const peers = counted.filter((row) => row.role === "peer");
    const bestPeer = peers.length === 0 ? undefined : Math.min(...peers.map(perPair));
    lines.push(`| **${group.name}** | | | | |`);
    for (const row of counted) {
      const result = results.get(row.mode);
      const units = unitsOf(result);
      lines.push(
        `| ${row.label} (\`${row.mode}\`) | ${thousands(result.perPair)} | ${
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
const all = GROUPS.flatMap((group) => group.rows.map((row) => row.mode));
for (const mode of chosen) {
  if (!all.includes(mode)) throw new Error(`unknown mode ${mode}: one of ${all.join(", ")}`);
}
const modes = chosen.length === 0 ? all : chosen;
const startedAt = new Date();
const loadBefore = loadavg()[0];
const results = new Map();
for (const mode of modes) {
  process.stderr.write(`instructions: ${mode} (${PAIRS} pairs)…\n`);
  results.set(mode, count(mode));
}
const loadAfter = loadavg()[0];
const table = render(GROUPS, results);
const header = [
  `Instructions per lock + release pair, counted by callgrind (main thread; (I(2n) − I(n)) / n with n = ${PAIRS}`,
  `pairs after the warm-up), one mode at a time, ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC,`,
  `${Math.round((Date.now() - startedAt.getTime()) / 60_000)} minutes, load average ${loadBefore.toFixed(1)} before and ${loadAfter.toFixed(1)} after.`,
].join("\n");
console.log(`${header}\n\n${table}`);
if (chosen.length === 0) {
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(new URL("instructions.md", `file://${RESULTS}`), `# Instructions per pair\n\n${header}\n\n${table}\n`);
  writeFileSync(
    new URL("instructions.json", `file://${RESULTS}`),
    `${JSON.stringify({ startedAt, pairs: PAIRS, loadBefore, loadAfter, results: Object.fromEntries(results) }, null, 2)}\n`,
  );
}
