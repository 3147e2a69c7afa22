/**
 * Start-up of the `globallock` command: `globallock run --key k -- true` on the file store against
 * `node -e 0` (and `flock(1)` where installed), measured side by side in one run, N rounds
 * interleaved (node, globallock, flock, node, …), each the wall time from spawn to exit. Prints a
 * Markdown table of medians and the ratio to `node -e 0`, the mean CPU time (user + system) of
 * each and its ratio (Linux: this process's children's time in /proc/self/stat, counted in clock
 * ticks over all rounds; the load of a shared machine moves it far less than the wall time; a
 * process the command leaves running, as the Node reaper of 0.1 builds was, is not counted), and
 * the modules the command loads (counted once, through a module-loading hook). Needs the build (`npm run build`); writes nothing
 * but a temporary lock directory, removed at the end.
 *
 *   node bench/cli-startup.mjs           # 30 rounds
 *   CLI_ROUNDS=100 node bench/cli-startup.mjs
 *   CLI_COMPARE=/path/to/other/dist/cli/globallock.cjs node bench/cli-startup.mjs   # another build beside it
 *
 * Target: the command's median at most 1.5× `node -e 0`'s.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { median, percentile } from "./lib/stats.mjs";

const CLI = fileURLToPath(new URL("../dist/cli/globallock.cjs", import.meta.url));
const ROUNDS = Number(process.env.CLI_ROUNDS ?? 30);
const TARGET = 1.5;

if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
const work = mkdtempSync(join(tmpdir(), "globallock-cli-startup-"));
const lockDir = join(work, "locks");
const flockPath = ["/usr/bin/flock", "/bin/flock"].find((path) => existsSync(path));

/** The contenders: label and command line. */
const contenders = [
  ["`node -e 0`", [process.execPath, "-e", "0"]],
  [
    "`globallock run --key k -- true` (file store)",
    [process.execPath, CLI, "run", "--dir", lockDir, "--key", "k", "--", "true"],
  ],
  ...(process.env.CLI_COMPARE === undefined
    ? []
    : [
        [
          "the same, `CLI_COMPARE` build",
          [process.execPath, process.env.CLI_COMPARE, "run", "--dir", lockDir, "--key", "k", "--", "true"],
        ],
      ]),
  ...(flockPath === undefined ? [] : [["`flock FILE true` (util-linux)", [flockPath, join(work, "flock"), "true"]]]),
];

/** CPU time (ms, user + system) of this process's waited-for children so far; undefined off Linux. */
function childrenCpuMs() {
  try {
    // Fields after the command name: state is the 1st, cutime the 14th, cstime the 15th (proc(5)).
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ").at(-1).split(" ");
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}
/** Linux's USER_HZ, the unit of /proc/PID/stat times (100 on every mainstream architecture). */
const TICKS_PER_SECOND = 100;

/** Wall time (ms) of one run of `argv`, spawn to exit; throws if it fails. */
function time(argv) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("GLOBALLOCK_")));
  const start = performance.now();
  const result = spawnSync(argv[0], argv.slice(1), { stdio: "ignore", env });
  const ms = performance.now() - start;
  if (result.status !== 0) throw new Error(`${argv.join(" ")} exited ${result.status ?? result.signal}`);
  return ms;
}

/**
 * The modules one `globallock run` loads: JavaScript files of the package (the loader and the
 * bundle it reads) and of other packages, and Node's built-in modules beyond those `node -e 0`
 * loads. Counted by a preload (`--require`) that notes the JavaScript files read through
 * `fs.readFileSync` (how both the CommonJS loader and the command's loader read them) and, at exit,
 * `process.moduleLoadList`.
 */
function countModules() {
  const log = join(work, "modules.json");
  const preload = join(work, "preload.cjs");
  writeFileSync(
    preload,
    `const fs = require("node:fs");\nconst read = fs.readFileSync;\nconst files = new Set();\n` +
      `fs.readFileSync = function (path, ...rest) { if (typeof path === "string" && /\\.[cm]?js$/.test(path)) files.add(path); return read.call(this, path, ...rest); };\n` +
      `process.on("exit", () => fs.writeFileSync(${JSON.stringify(log)}, JSON.stringify({ files: [...files], builtins: process.moduleLoadList.filter((name) => name.startsWith("NativeModule ")) })));\n`,
  );
  const loaded = (argv) => {
    time([process.execPath, "--require", preload, ...argv]);
    return JSON.parse(readFileSync(log, "utf8"));
  };
  const bare = new Set(loaded(["-e", "0"]).builtins);
  const run = loaded([CLI, "run", "--dir", lockDir, "--key", "k", "--", "true"]);
  const packageRoot = fileURLToPath(new URL("..", import.meta.url));
  const own = run.files.filter((file) => file.startsWith(packageRoot) && !file.includes("/node_modules/"));
  return {
    own: own.length,
    packages: run.files.filter((file) => file.includes("/node_modules/")).length,
    builtins: run.builtins.filter((name) => !bare.has(name)).length,
    redis: own.filter((file) => file.includes("/redis/")).length,
  };
}

try {
  const samples = contenders.map(() => []);
  const cpu = contenders.map(() => 0);
  for (const [, argv] of contenders) time(argv); // warm the file cache
  for (let round = 0; round < ROUNDS; round++) {
    contenders.forEach(([, argv], index) => {
      const before = childrenCpuMs();
      samples[index]?.push(time(argv));
      cpu[index] += (childrenCpuMs() ?? Number.NaN) - (before ?? Number.NaN);
    });
  }
  const base = median(samples[0]);
  const loadAverage = loadavg()[0];
  const cpus = availableParallelism();
  const cpuBase = (cpu[0] ?? Number.NaN) / ROUNDS;
  const modules = countModules();
  const lines = [
    `CLI start-up, ${ROUNDS} rounds interleaved (Node ${process.version}, load average at end ${loadAverage.toFixed(2)})`,
    "",
    "| command | median | p90 | × `node -e 0` | CPU, mean | × `node -e 0` |",
    "| --- | ---: | ---: | ---: | ---: | ---: |",
    ...contenders.map(([label], index) => {
      const list = samples[index] ?? [];
      const cpuMs = (cpu[index] ?? Number.NaN) / ROUNDS;
      return `| ${label} | ${median(list).toFixed(0)} ms | ${percentile(list, 90).toFixed(0)} ms | ${(median(list) / base).toFixed(2)}× | ${cpuMs.toFixed(0)} ms | ${(cpuMs / cpuBase).toFixed(2)}× |`;
    }),
    "",
    `Modules loaded by the run: ${modules.own} files of globallock (${modules.redis} of them Redis's), ${modules.packages} from other packages, ${modules.builtins} built-in modules beyond those of \`node -e 0\`.`,
    loadAverage > cpus
      ? `Target (at most ${TARGET}× \`node -e 0\`) not judged: load average ${loadAverage.toFixed(2)} above the ${cpus} CPUs, so the wall times measure the run queue more than the commands; compare the CPU column, or rerun on a quiet machine (or under \`chrt -f 10\`).`
      : `Target: at most ${TARGET}× \`node -e 0\`: ${median(samples[1]) / base <= TARGET ? "met" : "NOT met"}.`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
