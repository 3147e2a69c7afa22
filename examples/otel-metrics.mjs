// OpenTelemetry metrics from globallock's diagnostics channels: how long callers wait for locks,
// how long they hold them, how many leases are lost and how many extensions fail.
//
//   node examples/otel-metrics.mjs                                   # MemoryLocker
//   REDIS_URL=redis://127.0.0.1:6379 node examples/otel-metrics.mjs  # RedisLocker (adds a lost lock)
//
// recordLockMetrics(meter) is the part to copy: it needs @opentelemetry/api (an optional peer
// dependency of globallock) and works with any MeterProvider. Running this file also needs
// @opentelemetry/sdk-metrics, which prints the metrics below instead of exporting them.

import diagnostics_channel from "node:diagnostics_channel";
import { pathToFileURL } from "node:url";
import { metrics } from "@opentelemetry/api";
import { ACQUIRE_CHANNEL, EXTEND_CHANNEL, LOST_CHANNEL, MemoryLocker, RELEASE_CHANNEL, RedisLocker } from "globallock";
import { Redis } from "ioredis";

/** Bucket boundaries (ms) of the wait and hold histograms: from a hand-off to a long job. */
const MS_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000];

/**
 * Records globallock's activity as metrics of `meter`, until the returned function is called:
 *
 * - `globallock.acquire.duration` (histogram, ms): how long each lock/tryLock/acquire/tryAcquire
 *   call took, waiting included; attributes `globallock.kind`, `globallock.mode`, `globallock.outcome`
 *   (acquired, not-acquired, aborted, closed, error);
 * - `globallock.hold.duration` (histogram, ms): how long each lease was held, by kind and release
 *   outcome (released, expired, taken, unknown);
 * - `globallock.lost` (counter): leases lost, by kind and reason (taken, expired) — not counting
 *   leases acquired with `autoExtend: false` that reached their expiry, as their holder asked;
 * - `globallock.extend.failures` (counter): leases whose extension failed, by kind and outcome
 *   (retry: the command failed and is retried; taken, expired: the lease is lost);
 * - `globallock.extend.lag` (histogram, ms): how late the lease keeper sent each extension.
 *
 * Keys are never attributes (there may be millions of them).
 */
export function recordLockMetrics(meter = metrics.getMeter("globallock")) {
  const acquireDuration = meter.createHistogram("globallock.acquire.duration", {
    description: "Time a lock, tryLock, acquire or tryAcquire call took, waiting included",
    unit: "ms",
    advice: { explicitBucketBoundaries: MS_BUCKETS },
  });
  const holdDuration = meter.createHistogram("globallock.hold.duration", {
    description: "Time a lease was held, from its grant to its release",
    unit: "ms",
    advice: { explicitBucketBoundaries: MS_BUCKETS },
  });
  const lost = meter.createCounter("globallock.lost", {
    description: "Leases lost (autoExtend: false leases reaching their expiry are not counted)",
  });
  const extendFailures = meter.createCounter("globallock.extend.failures", {
    description: "Leases whose extension failed: retried (retry) or lost (taken, expired)",
  });
  const extendLag = meter.createHistogram("globallock.extend.lag", {
    description: "How late the lease keeper sent an extension after it was due",
    unit: "ms",
    advice: { explicitBucketBoundaries: [0, 1, 5, 10, 25, 50, 100, 250, 500, 1000] },
  });

  const acquire = diagnostics_channel.tracingChannel(ACQUIRE_CHANNEL);
  const onAcquire = {
    asyncEnd(message) {
      acquireDuration.record(message.waitedMs, {
        "globallock.kind": message.kind,
        "globallock.mode": message.mode,
        "globallock.outcome": message.outcome,
      });
    },
  };
  const onRelease = ({ kind, heldMs, outcome }) => {
    // heldMs is unknown for leases granted before anyone listened.
    if (heldMs !== undefined) holdDuration.record(heldMs, { "globallock.kind": kind, "globallock.outcome": outcome });
  };
  const onExtend = ({ kind, outcome, count, lagMs }) => {
    extendLag.record(lagMs, { "globallock.kind": kind });
    if (outcome !== "extended") extendFailures.add(count, { "globallock.kind": kind, "globallock.outcome": outcome });
  };
  const onLost = ({ kind, reason, expected }) => {
    if (!expected) lost.add(1, { "globallock.kind": kind, "globallock.reason": reason });
  };

  acquire.subscribe(onAcquire);
  diagnostics_channel.subscribe(RELEASE_CHANNEL, onRelease);
  diagnostics_channel.subscribe(EXTEND_CHANNEL, onExtend);
  diagnostics_channel.subscribe(LOST_CHANNEL, onLost);
  return function stopRecordingLockMetrics() {
    acquire.unsubscribe(onAcquire);
    diagnostics_channel.unsubscribe(RELEASE_CHANNEL, onRelease);
    diagnostics_channel.unsubscribe(EXTEND_CHANNEL, onExtend);
    diagnostics_channel.unsubscribe(LOST_CHANNEL, onLost);
  };
}

/** Some contended locks, and on Redis a lock deleted behind its holder's back; then the metrics. */
async function main() {
  const { MeterProvider, MetricReader } = await import("@opentelemetry/sdk-metrics");
  class OnDemandReader extends MetricReader {
    async onForceFlush() {}
    async onShutdown() {}
  }
  const reader = new OnDemandReader();
  const provider = new MeterProvider({ readers: [reader] });
  const stop = recordLockMetrics(provider.getMeter("globallock-example"));

  const redisUrl = process.env.REDIS_URL;
  const client = redisUrl ? new Redis(redisUrl) : undefined;
  const locker = client ? new RedisLocker(client, { expiry: 1000 }) : new MemoryLocker();
  try {
    // Eight workers, one key: seven of them wait each time.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        const release = await locker.lock(AbortSignal.timeout(10_000), "report");
        await new Promise((resolve) => setTimeout(resolve, 10));
        await release();
      }),
    );
    if (client && locker instanceof RedisLocker) {
      const lease = await locker.acquire(undefined, "nightly-job");
      await client.del("globallock:nightly-job"); // someone deletes it behind our back
      await new Promise((resolve) => lease.lost.addEventListener("abort", resolve, { once: true }));
      await lease.release();
    }
    const { resourceMetrics } = await reader.collect();
    for (const metric of resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics)) {
      for (const point of metric.dataPoints) {
        const value =
          typeof point.value === "number"
            ? point.value
            : `${point.value.count} samples, max ${Math.round(point.value.max)}`;
        console.log(`${metric.descriptor.name} ${JSON.stringify(point.attributes)}: ${value}`);
      }
    }
  } finally {
    stop();
    await locker.close();
    client?.disconnect();
    await provider.shutdown();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
