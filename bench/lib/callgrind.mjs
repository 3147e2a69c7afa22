/**
 * Runs bench/instructions.mjs's child (one mode's lock + release loop) under
 * `valgrind --tool=callgrind`, main thread only (`node --single-threaded`: V8 compiles on it too).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const INSTRUCTIONS = fileURLToPath(new URL("../instructions.mjs", import.meta.url));

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
