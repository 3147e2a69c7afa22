import type { Lease } from "../../src/index.js";
import { sleep } from "./wait.js";

/**
 * Starts a stream of overlapping holders: every 20 ms a new caller acquires through `acquire`
 * (given the stream's signal and its index), holds for 60 ms and releases, so the key is never
 * free of them. `stop()` ends the stream (aborting callers still waiting) and resolves once every
 * holder has released.
 */
export function overlappingHolders(acquire: (signal: AbortSignal, index: number) => Promise<Lease>): {
  stop(): Promise<void>;
} {
  const stopping = new AbortController();
  const stream = (async () => {
    const holders: Array<Promise<void>> = [];
    for (let i = 0; !stopping.signal.aborted; i++) {
      holders.push(
        acquire(stopping.signal, i).then(
          async (lease) => {
            await sleep(60);
            await lease.release();
          },
          () => undefined,
        ),
      );
      await sleep(20);
    }
    await Promise.all(holders);
  })();
  return {
    stop: () => {
      stopping.abort();
      return stream;
    },
  };
}
