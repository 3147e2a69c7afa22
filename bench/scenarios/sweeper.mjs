/**
 * Scenario 6: the auto-extension sweeper. One RedisLocker holds N locks (N = 100, 1,000, 10,000)
 * with a short expiry, so that its sweeper runs every expiry / 2; each sweep extends all N.
 *
 * RedisLocker keeps its sweeper private, and the benchmark does not touch src/, so sweeps are
 * observed from the outside: once all N locks are held, the only traffic on the locker's client is
 * the sweeper's, so the client we hand the locker gets an instance-level wrapper of ioredis'
 * `sendCommand` that notes every command sent and every reply. Sweeps show up as bursts separated
 * by quiet time; a sweep lasts from its first command sent to its last reply, and
 * `process.cpuUsage()` is read at both ends. The commands per lock (normally 1 EVALSHA) are
 * reported too. A burst already under way when observation starts is discarded.
 *
 * The target: 10,000 locks swept within expiry / 10 at the default 30 s expiry, i.e. < 3000 ms.
 * A sweep's duration does not depend on the expiry (only its period does).
 */
import { RedisLocker } from "globallock";
import { CONFIG } from "../lib/config.mjs";
import { connectClient } from "../lib/redis-client.mjs";
import { median } from "../lib/stats.mjs";
import { now, sleep } from "../lib/timing.mjs";

/** Default expiry of RedisLocker (ms), for the target. */
const DEFAULT_EXPIRY_MS = 30_000;
/** Concurrent tryLock / release calls while filling and emptying the locker. */
const FILL_CONCURRENCY = 128;
/** Quiet time (ms) that separates two sweeps. */
const SWEEP_GAP_MS = 50;

/**
 * Observes the commands `client` sends once {@link enable}d and groups them into sweeps.
 * @param {import("ioredis").Redis} client
 */
function observeSweeps(client) {
  const original = client.sendCommand;
  /** Finished bursts. */
  const bursts = [];
  let enabledAt = Number.POSITIVE_INFINITY;
  let current;
  const close = () => {
    if (current === undefined) return;
    if (current.start - enabledAt >= SWEEP_GAP_MS) {
      // Only bursts that began after a quiet gap are whole sweeps.
      bursts.push({
        commands: current.calls,
        errors: current.errors,
        durationMs: current.end - current.start,
        cpuMs: (current.cpuEnd.user + current.cpuEnd.system - current.cpuStart.user - current.cpuStart.system) / 1000,
      });
    }
    current = undefined;
  };
  const onReply = (burst, failed) => {
    burst.replies++;
    if (failed) burst.errors++;
    if (burst.replies === burst.calls) {
      burst.end = now();
      burst.cpuEnd = process.cpuUsage();
    }
  };
  client.sendCommand = function observedSendCommand(command, stream) {
    if (now() >= enabledAt && stream === undefined) {
      if (current !== undefined && current.replies === current.calls && now() - current.end > SWEEP_GAP_MS) close();
      current ??= { start: now(), cpuStart: process.cpuUsage(), calls: 0, replies: 0, errors: 0 };
      const burst = current;
      burst.calls++;
      const reply = original.call(this, command, stream);
      reply.then(
        () => onReply(burst, false),
        () => onReply(burst, true),
      );
      return reply;
    }
    return original.call(this, command, stream);
  };
  return {
    bursts,
    enable() {
      enabledAt = now();
    },
    /** Closes a burst that has been quiet for the gap. */
    poll() {
      if (current !== undefined && current.replies === current.calls && now() - current.end > SWEEP_GAP_MS) close();
    },
  };
}

/** Runs `task(i)` for i in [0, count) with at most `concurrency` in flight. */
async function forEachConcurrently(count, concurrency, task) {
  let next = 0;
  const lane = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}

/** Holds `size` locks until `sweeps` whole sweeps were observed (bounded in time). */
async function measureSize(port, monitor, size, sweeps, expiryMs) {
  await monitor.flushall();
  const client = await connectClient(port);
  const observer = observeSweeps(client);
  let lost = 0;
  const locker = new RedisLocker(client, { expiry: expiryMs, onLockLost: () => lost++ });
  const releases = [];
  try {
    const fillStart = now();
    await forEachConcurrently(size, FILL_CONCURRENCY, async (i) => {
      const [acquired, release] = await locker.tryLock(undefined, `sweep:${i}`);
      if (!acquired) throw new Error(`sweeper: could not take sweep:${i}`);
      releases.push(release);
    });
    const fillMs = now() - fillStart;
    observer.enable();
    const deadline = now() + (sweeps + 2) * (expiryMs / 2) + 5000;
    while (observer.bursts.length < sweeps && now() < deadline) {
      await sleep(10);
      observer.poll();
    }
    const measured = observer.bursts.slice(0, sweeps).map((burst) => ({
      ...burst,
      commandsPerLock: burst.commands / size,
      extensionsPerSec: (size * 1000) / burst.durationMs,
    }));
    return { size, fillMs, heldCount: locker.heldCount, lost, sweeps: measured };
  } finally {
    await forEachConcurrently(releases.length, FILL_CONCURRENCY, (i) => releases[i]());
    await locker.close();
    client.disconnect();
  }
}

/**
 * Runs scenario 6.
 * @param {{ port: number, monitor: import("ioredis").Redis, log: (line: string) => void }} context
 */
export async function runSweeper({ port, monitor, log }) {
  const { sizes, sweeps, expiryMs } = CONFIG.sweeper;
  const targetMs = DEFAULT_EXPIRY_MS / 10;
  const results = [];
  for (const size of sizes) {
    const measured = await measureSize(port, monitor, size, sweeps, expiryMs);
    // The first sweep of each size runs partly cold (JIT, script cache); the rest are "warm".
    const warm = measured.sweeps.length > 1 ? measured.sweeps.slice(1) : measured.sweeps;
    const durationMs = median(warm.map((s) => s.durationMs));
    results.push({
      ...measured,
      sweepsObserved: measured.sweeps.length,
      firstSweepMs: measured.sweeps[0]?.durationMs,
      durationMs,
      cpuMs: median(warm.map((s) => s.cpuMs)),
      commandsPerLock: median(warm.map((s) => s.commandsPerLock)),
      extensionsPerSec: (size * 1000) / durationMs,
      targetMs,
      withinTarget: Math.max(durationMs, measured.sweeps[0]?.durationMs ?? 0) < targetMs,
    });
    log(`sweeper: ${size} locks done`);
  }
  return { config: { sizes, sweeps, expiryMs, intervalMs: expiryMs / 2, targetMs }, results };
}
