/**
 * Where a mode's instructions go, function by function, beside another mode's:
 * `node bench/instructions-by-function.mjs [mode] [other mode] [pairs]` (defaults: redis,
 * peer-mutex, 10000), modes as in instructions.mjs. Each mode's child (the same program
 * instructions.mjs counts) runs once under `valgrind --tool=callgrind`, with `pairs` counted pairs
 * after the warm-up, with Node's
 * `--perf-basic-prof`, which writes the address range of every function V8 compiles to
 * /tmp/perf-PID.map: callgrind's costs at those addresses (JIT code, which it cannot name) are
 * summed per JavaScript function; V8's builtins and C++ functions keep their own names. Only the
 * measured pairs are read (the part between the child's dump points, as instructions.mjs counts
 * them), so start-up, warm-up and early compiles are left out. Printed per pair, the two modes side by
 * side, largest difference first, and the totals of four groups: globallock's own JavaScript, the
 * rest of the JavaScript (the client, Node's streams, a peer), V8's compiler, and everything else.
 *
 * A profile to read, not a figure to quote: the counts to quote are instructions.mjs's (one
 * function's JIT code moved by a late recompile can land under "unknown"). Needs the build (`npm run build`), valgrind and
 * callgrind_annotate; the Redis modes start their own redis-server, the newer stores' modes
 * (bench/lib/store-modes.mjs) their own server, one for both modes when they need the same.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { measuredPart, runChildUnderCallgrind, WARM_UP } from "./lib/callgrind.mjs";
import { STORE_MODES, startStoreServer } from "./lib/store-modes.mjs";

const [mode = "redis", other = "peer-mutex", pairsArgument = "10000"] = process.argv.slice(2);
const pairs = Number(pairsArgument);
const REDIS_MODES = new Set(["redis", "redis-semaphore", "peer-semaphore", "peer-mutex"]);

/**
 * One child run of `n` counted pairs under callgrind: a mode's steady-state cost per function
 * name over its measured pairs (JIT code named through the perf map).
 */
function profileRun(kind, n, port, dir) {
  const out = join(dir, `${kind}-${n}.callgrind`);
  const run = runChildUnderCallgrind({
    out,
    mode: kind,
    pairs: n,
    keys: 1,
    n,
    port,
    nodeFlags: ["--perf-basic-prof"],
  });
  // valgrind runs the program in its own process: the child's pid is valgrind's.
  const map = `/tmp/perf-${run.pid}.map`;
  const ranges = existsSync(map) ? readPerfMap(map) : [];
  rmSync(map, { force: true });
  const annotated = spawnSync("callgrind_annotate", ["--inclusive=no", "--threshold=100", measuredPart(out)], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  }).stdout;
  const costs = new Map();
  for (const line of annotated.split("\n")) {
    const match = /^\s*([\d,]+) \([ \d.]+%\)\s+(.*)$/.exec(line);
    if (match === null || line.includes("PROGRAM TOTALS")) continue;
    const cost = Number(match[1].replaceAll(",", ""));
    const symbol = match[2].replace(/\s*\[[^\]]*\]$/, "").replace(/^\?\?\?:/, "");
    const address = /^0x([0-9a-f]+)$/.exec(symbol);
    const name = address === null ? symbol : `JS ${nameAt(ranges, Number.parseInt(address[1], 16))}`;
    costs.set(name, (costs.get(name) ?? 0) + cost);
  }
  return costs;
}

/** The perf map's ranges, sorted by start: [start, end, name]. */
function readPerfMap(path) {
  const ranges = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const [start, size, ...name] = line.split(" ");
    if (name.length === 0) continue;
    const from = Number.parseInt(start, 16);
    ranges.push([from, from + Number.parseInt(size, 16), name.join(" ")]);
  }
  return ranges.sort((a, b) => a[0] - b[0]);
}

/** The function whose code holds `address` (the latest compiled there), or "unknown". */
function nameAt(ranges, address) {
  let low = 0;
  let high = ranges.length - 1;
  let found = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (ranges[middle][0] <= address) {
      found = middle;
      low = middle + 1;
    } else high = middle - 1;
  }
  for (let index = found; index >= 0 && index > found - 64; index--) {
    const [from, to, name] = ranges[index];
    if (from <= address && address < to) return name.replace(/file:\/\/\/\S*?\/(dist\/esm|node_modules)\//, "");
  }
  return "unknown";
}

/** The group a function's cost is totalled in. */
function groupOf(name) {
  if (name.startsWith("JS ")) {
    return /\b(core|redis|internal|file|memory|postgres|mysql|etcd|sql|table|zookeeper|memcached)\/[\w-]+\.js/.test(
      name,
    ) && !name.includes("node:")
      ? "globallock JavaScript"
      : "other JavaScript";
  }
  if (name.includes("compiler::") || name.includes("maglev")) return "V8 compiler";
  return "builtins, runtime, GC, libc";
}

const dir = mkdtempSync(join(tmpdir(), "globallock-by-function-"));
let server;
try {
  let port = "";
  if (REDIS_MODES.has(mode) || REDIS_MODES.has(other)) {
    const { startServer } = await import("./lib/redis-server.mjs");
    server = await startServer();
    port = String(server.port);
  } else if (STORE_MODES.has(mode) || STORE_MODES.has(other)) {
    // One server for both: a mode and its floor (`<mode>-raw`) need the same kind.
    server = await startStoreServer(STORE_MODES.has(mode) ? mode : other);
    port = server.port;
  }
  const counted = pairs;
  const [ours, theirs] = [mode, other].map((kind) => profileRun(kind, pairs, port, dir));
  const per = (costs, name) => (costs.get(name) ?? 0) / counted;
  const groups = new Map();
  for (const [costs, column] of [
    [ours, 0],
    [theirs, 1],
  ]) {
    for (const [name, cost] of costs) {
      const totals = groups.get(groupOf(name)) ?? [0, 0];
      totals[column] += cost / counted;
      groups.set(groupOf(name), totals);
    }
  }
  const lines = [
    `instructions per pair (${counted} measured pairs, after ${WARM_UP} of warm-up): ${mode} | ${other} | difference`,
  ];
  for (const [group, [a, b]] of groups) lines.push(`${group.padEnd(30)} ${fmt(a)} ${fmt(b)} ${fmt(a - b)}`);
  lines.push("", "largest differences:");
  const names = [...new Set([...ours.keys(), ...theirs.keys()])];
  names.sort((a, b) => per(ours, b) - per(theirs, b) - (per(ours, a) - per(theirs, a)));
  for (const name of names.slice(0, 40)) {
    lines.push(
      `${fmt(per(ours, name))} ${fmt(per(theirs, name))} ${fmt(per(ours, name) - per(theirs, name))}  ${name.slice(0, 110)}`,
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);
} finally {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
}

function fmt(value) {
  return Math.round(value).toString().padStart(9);
}
