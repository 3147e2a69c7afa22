/**
 * Runs bench/instructions.mjs's child (one mode's lock + release loop) under
 * `valgrind --tool=callgrind`, main thread only (`node --single-threaded`: V8 compiles on it too).
 *
 * The measured pairs are bracketed by dump points: the child calls {@link markMeasured} right
 * before its first measured pair and right after its last, and callgrind writes its counts so far
 * to a file at each (`--dump-before=getrusage`), so the second file holds exactly the measured
 * pairs. One run counts them, without start-up, warm-up or exit; the difference of two runs (n and
 * 2n pairs) that the counts were taken from before moved by up to ±5% from run to run (start-up,
 * compiles and exit differ between two processes), where bracketed runs mostly repeat within about
 * 0.6% (a late compile in the measured part can add a few percent: see INSTRUCTIONS_RUNS in
 * instructions.mjs).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const INSTRUCTIONS = fileURLToPath(new URL("../instructions.mjs", import.meta.url));

/**
 * Pairs run before the counted ones (`INSTRUCTIONS_WARM_UP`, default 10,000): V8 compiles with
 * `--single-threaded` on the main thread, so a late tier-up that lands in one run's counted pairs
 * and not the other's adds its compile work to the difference (seen: 3,000 pairs of warm-up left
 * 19k instructions per pair of TurboFan in one RedisLocker run and none in the next).
 */
export const WARM_UP = Number(process.env.INSTRUCTIONS_WARM_UP ?? 10_000);

/**
 * The child of `mode` counting `n` pairs (after the warm-up), its callgrind output written to `out`;
 * `nodeFlags` go to Node before the script. Returns the spawn's result; throws if valgrind failed.
 * @param {{ out: string, mode: string, pairs: number, keys: number, n: number, port: string, nodeFlags?: string[] }} run
 */
export function runChildUnderCallgrind({ out, mode, pairs, keys, n, port, nodeFlags = [] }) {
  const run = spawnSync(
    "valgrind",
    [
      "--tool=callgrind",
      `--callgrind-out-file=${out}`,
      "--dump-instr=no",
      // getrusage(2) is what process.cpuUsage() calls; nothing else in the child calls it.
      "--dump-before=getrusage",
      process.execPath,
      "--single-threaded",
      ...nodeFlags,
      INSTRUCTIONS,
      mode,
      String(pairs),
      String(keys),
      "--child",
      String(n),
      port,
    ],
    { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
  );
  if (run.status !== 0) throw new Error(`valgrind failed: ${run.stderr.slice(-2000)}`);
  return run;
}

/**
 * A dump point (see the top of this file): the child calls it right before its first measured
 * pair and right after its last. Reads this process's CPU usage, which costs one getrusage(2).
 */
export function markMeasured() {
  process.cpuUsage();
}

/**
 * The file holding the measured pairs of a run whose output was `out`: the second of the three
 * parts callgrind wrote (`out.1`: up to the first mark; `out.2`: between the marks; `out`: the
 * rest). Throws when the run did not make exactly two dumps (a mark missing, or another caller of
 * getrusage).
 * @param {string} out
 */
export function measuredPart(out) {
  if (!existsSync(`${out}.2`) || existsSync(`${out}.3`)) {
    throw new Error(`expected exactly two dump points in ${out} (see markMeasured)`);
  }
  return `${out}.2`;
}

/**
 * Instructions of the measured pairs of a run whose output was `out` (see {@link measuredPart}).
 * @param {string} out
 */
export function measuredInstructions(out) {
  return totalOf(measuredPart(out));
}

/**
 * The instruction total of one callgrind output file.
 * @param {string} file
 */
export function totalOf(file) {
  const text = readFileSync(file, "utf8");
  const total = /^summary: (\d+)/m.exec(text) ?? /^totals: (\d+)/m.exec(text);
  if (total === null) throw new Error(`no total in callgrind output ${file}`);
  return Number(total[1]);
}
