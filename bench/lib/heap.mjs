/**
 * Heap measurements: V8's heap after a forced full garbage collection. `global.gc` exists when Node
 * runs with `--expose-gc`; otherwise the flag is set at run time (`v8.setFlagsFromString`) and the
 * `gc` function taken from a fresh context, which is where V8 installs it once the flag is on.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { yieldToEventLoop } from "./timing.mjs";

/** @type {(() => void) | undefined} */
let gcFunction = typeof globalThis.gc === "function" ? globalThis.gc : undefined;

/** The `gc()` function, obtaining it on first use. */
function gc() {
  if (gcFunction === undefined) {
    setFlagsFromString("--expose-gc");
    const fn = runInNewContext("gc");
    if (typeof fn !== "function") throw new Error("cannot force a garbage collection: run node with --expose-gc");
    gcFunction = fn;
  }
  return gcFunction;
}

/**
 * Memory in use after two full collections with an event-loop turn between them (so that weak
 * references and finalizers settle): V8 heap used, and memory outside it (Buffers).
 * @returns {Promise<{ heapUsed: number, external: number }>}
 */
export async function heapAfterGc() {
  const collect = gc();
  collect();
  await yieldToEventLoop();
  collect();
  const { heapUsed, external } = process.memoryUsage();
  return { heapUsed, external };
}
