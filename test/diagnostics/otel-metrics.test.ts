/**
 * examples/otel-metrics.mjs: recordLockMetrics(meter) turns the diagnostics channels into
 * OpenTelemetry metrics. Checked with the SDK's in-memory exporter, on a MemoryLocker and on a
 * RedisLocker against a real redis-server, with contended locks and leases lost two ways (a key
 * deleted behind its holder's back, a server frozen past the lease). The example imports the built
 * package (`globallock`): npm test builds first.
 */
import type { Meter } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryLocker, RedisLocker } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually, sleep } from "../helpers/wait.js";

type RecordLockMetrics = (meter: Meter) => () => void;

let server: RedisServer;
beforeAll(async () => {
  [server] = (await startServers(1)) as [RedisServer];
});
afterAll(async () => {
  await stopServers(server === undefined ? [] : [server]);
});

/** The example's function (a plain .mjs module, so imported by URL). */
async function loadExample(): Promise<RecordLockMetrics> {
  const url = new URL("../../examples/otel-metrics.mjs", import.meta.url).href;
  const module = (await import(url)) as { recordLockMetrics: RecordLockMetrics };
  return module.recordLockMetrics;
}

/** Every data point of the metric `name` in the exporter's latest (cumulative) export. */
function pointsOf(exporter: InMemoryMetricExporter, name: string): Array<DataPoint<unknown>> {
  const latest = exporter.getMetrics().at(-1);
  const metric: MetricData | undefined = latest?.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .find((m) => m.descriptor.name === name);
  return (metric?.dataPoints ?? []) as Array<DataPoint<unknown>>;
}

/** The data point of `name` whose attributes include `attributes`. */
function pointOf<T>(exporter: InMemoryMetricExporter, name: string, attributes: Record<string, string>): T | undefined {
  const point = pointsOf(exporter, name).find((p) =>
    Object.entries(attributes).every(([attribute, value]) => p.attributes[attribute] === value),
  );
  return point?.value as T | undefined;
}

describe("examples/otel-metrics.mjs", () => {
  it("records wait and hold histograms, lost locks and failed extensions, then stops", async () => {
    const recordLockMetrics = await loadExample();
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
    const provider = new MeterProvider({ readers: [reader] });
    const stop = recordLockMetrics(provider.getMeter("test"));
    const admin = server.client();
    const client = server.client();
    const memory = new MemoryLocker();
    const redis = new RedisLocker(client, { expiry: 1000, operationTimeout: 150 });
    const contend = async (locker: MemoryLocker | RedisLocker, workers: number): Promise<void> => {
      const key = uniqueKey("contended");
      await Promise.all(
        Array.from({ length: workers }, async () => {
          const release = await locker.lock(AbortSignal.timeout(10_000), key);
          await sleep(20);
          await release();
        }),
      );
    };
    try {
      await contend(memory, 5);
      const held = await memory.acquire(undefined, "busy");
      expect(await memory.tryAcquire(undefined, "busy")).toBeUndefined();
      await held.release();
      await contend(redis, 4);

      // Lost: deleted behind its holder's back (taken), and the server frozen past the lease (expired).
      const deleted = await redis.acquire(undefined, uniqueKey("deleted"));
      await admin.del(`globallock:${deleted.key}`);
      await eventually(() => deleted.lost.aborted, 3000);
      await deleted.release();
      // A lease left to expire (autoExtend: false) is not a lost lock.
      const once = await redis.acquire(undefined, uniqueKey("once"), { autoExtend: false, expiry: 300 });
      await eventually(() => once.lost.aborted, 3000);
      const frozen = await redis.acquire(undefined, uniqueKey("frozen"));
      server.pause();
      try {
        await eventually(() => frozen.lost.aborted, 3000);
        // Its release cannot be answered either: "unknown" (the key expires on its own).
        expect(await frozen.releaseWithOutcome()).toBe("unknown");
      } finally {
        server.resume();
      }
      await once.release();
    } finally {
      stop();
      await Promise.all([memory.close(), redis.close()]);
      admin.disconnect();
      client.disconnect();
    }
    await reader.forceFlush();

    const waits = (kind: string, mode: string, outcome: string): Histogram | undefined =>
      pointOf<Histogram>(exporter, "globallock.acquire.duration", {
        "globallock.kind": kind,
        "globallock.mode": mode,
        "globallock.outcome": outcome,
      });
    const holds = (kind: string, outcome: string): Histogram | undefined =>
      pointOf<Histogram>(exporter, "globallock.hold.duration", {
        "globallock.kind": kind,
        "globallock.outcome": outcome,
      });

    expect(waits("memory-lock", "lock", "acquired")?.count).toBe(5);
    // The last of five workers holding 20 ms each waited for the four before it.
    expect(waits("memory-lock", "lock", "acquired")?.max).toBeGreaterThanOrEqual(75);
    expect(waits("memory-lock", "tryAcquire", "not-acquired")?.count).toBe(1);
    expect(holds("memory-lock", "released")?.count).toBe(6);

    expect(waits("redis-lock", "lock", "acquired")?.count).toBe(4);
    expect(waits("redis-lock", "lock", "acquired")?.max).toBeGreaterThanOrEqual(55);
    expect(holds("redis-lock", "released")?.count).toBe(4);
    expect(holds("redis-lock", "released")?.min).toBeGreaterThanOrEqual(18);
    expect(holds("redis-lock", "unknown")?.count).toBe(1);
    expect(holds("redis-lock", "unknown")?.min).toBeGreaterThanOrEqual(900);

    // Counted for this test's RedisLocker only (the file runs in a process of its own: see
    // vitest.config.ts; the memory locker's leases are never lost).
    const lost = (reason: string): number | undefined =>
      pointOf<number>(exporter, "globallock.lost", { "globallock.kind": "redis-lock", "globallock.reason": reason });
    expect(lost("taken")).toBe(1);
    expect(lost("expired")).toBe(1);
    expect(
      pointsOf(exporter, "globallock.lost").filter((p) => p.attributes["globallock.kind"] === "redis-lock"),
    ).toHaveLength(2);
    expect(
      pointOf<number>(exporter, "globallock.extend.failures", {
        "globallock.kind": "redis-lock",
        "globallock.outcome": "taken",
      }),
    ).toBe(1);
    expect(
      pointOf<number>(exporter, "globallock.extend.failures", {
        "globallock.kind": "redis-lock",
        "globallock.outcome": "retry",
      }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      pointOf<Histogram>(exporter, "globallock.extend.lag", { "globallock.kind": "redis-lock" })?.count,
    ).toBeGreaterThanOrEqual(2);

    // Stopped: nothing more is recorded.
    const after = new MemoryLocker();
    const release = await after.lock(undefined, uniqueKey());
    await release();
    await reader.forceFlush();
    expect(pointOf<Histogram>(exporter, "globallock.hold.duration", { "globallock.kind": "memory-lock" })?.count).toBe(
      6,
    );
    await provider.shutdown();
  });
});
