import { defineConfig } from "vitest/config";

/**
 * Test files that observe the whole process: diagnostics channels, process warnings and unhandled
 * rejections, the count of active timers. Each runs in a fresh process (`isolate: true`): a file
 * that ran before it in the same worker may leave leases behind whose keeper still extends them,
 * or reports them lost once that file stopped its server, for up to a lease's expiry (a combined
 * locker's diagnostics test once recorded such a loss).
 */
const PROCESS_OBSERVERS = [
  "test/core/abort-hub.test.ts",
  "test/diagnostics/diagnostics.test.ts",
  "test/diagnostics/diagnostics-stores.test.ts",
  "test/diagnostics/otel-metrics.test.ts",
  "test/core/internal.test.ts",
  "test/memory/memory-locker.test.ts",
  "test/memory/memory-primitives.test.ts",
  "test/redis/redis-locker.test.ts",
  "test/redis/redis-reliability.test.ts",
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Three test files at a time on 2 cores: most tests wait on servers, timers and child
    // processes. Measured on 2 cores (Intel Xeon VM, 2026-11-29): 307 s with two workers, every
    // file isolated; 253 s with three; 215–223 s with three and only the process observers
    // isolated. See docs/development.md.
    maxWorkers: 3,
    reporters: ["default", "./test/helpers/summary-reporter.ts"],
    projects: [
      {
        extends: true,
        // One worker process runs several of these files in one module graph: the sources are
        // imported and transformed once per worker instead of once per file (34 s of CPU over a
        // run before, 11–13 s after). Each file starts its own servers, lockers and clients.
        test: { name: "shared", include: ["test/**/*.test.ts"], exclude: PROCESS_OBSERVERS, isolate: false },
      },
      { extends: true, test: { name: "isolated", include: PROCESS_OBSERVERS, isolate: true } },
    ],
  },
});
