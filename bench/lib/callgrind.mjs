/**
 * Runs bench/instructions.mjs's child (one mode's lock + release loop) under
 * `valgrind --tool=callgrind`, main thread only (`node --single-threaded`: V8 compiles on it too).
 */
import { spawnSync } from "node:child_process";
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
