/**
 * Scenario 6: the auto-extension sweeper. One RedisLocker holds N locks (N = 100, 1,000, 10,000)
 * with a short expiry, so that its sweeper runs every expiry / 2; each sweep extends all N.
 *
 * RedisLocker keeps its Sweeper private, so the benchmark observes sweeps from outside without
 * touching src/: the locker sends every extension through `client.evalsha` (looked up on the
 * client at call time), so the client we hand it gets a wrapper that recognises redlock's extend
 * script by its SHA-1 and notes when a sweep's first extension is sent and when its N-th reply
 * arrives, with `process.cpuUsage()` at both points. Sweeps are told apart by the quiet gap
 * between them; a sweep that covered fewer than N locks (one that ran while the locks were still
 * being taken) is discarded.
 *
 * The target: 10,000 locks swept within expiry / 10 at the default 30 s expiry, i.e. < 3000 ms.
 * A sweep's duration does not depend on the expiry (only its period does).
 */
import { RedisLocker } from "globallock";
import Redlock from "redlock";
import { CONFIG } from "../lib/config.mjs";
import { connectClient } from "../lib/redis-client.mjs";
import { median } from "../lib/stats.mjs";
import { now } from "../lib/timing.mjs";

/** Default expiry of RedisLocker (ms), for the target. */
const DEFAULT_EXPIRY_MS = 30_000;
/** Concurrent tryLock / release calls while filling and emptying the locker. */
const FILL_CONCURRENCY = 128;
/** Quiet time (ms) that separates two sweeps. */
const SWEEP_GAP_MS = 50;

/**
 * Wraps `client.evalsha` to time sweeps of `size` extensions.
 * @returns {{ sweeps: object[], enable(): void }}
 */
function observeSweeps(client, extendSha, size) {
  const original = client.evalsha;
  const sweeps = [];
  let enabled = false;
  let current;
  const finish = (sweep) => {
    sweep.replies++;
    sweep.lastReply = now();
    if (sweep.calls === size && sweep.replies === size) {
      const cpu = process.cpuUsage(sweep.cpuStart);
      sweeps.push({
        extensions: size,
        durationMs: sweep.lastReply - sweep.start,
        cpuMs: (cpu.user + cpu.system) / 1000,
        cpuUserMs: cpu.user / 1000,
        cpuSystemMs: cpu.system / 1000,
        errors: sweep.errors,
      });
    }
  };
  client.evalsha = function observedEvalsha(sha, ...args) {
    if (!enabled || sha !== extendSha) return original.call(this, sha, ...args);
    const idle =
      current === undefined || (current.replies === current.calls && now() - current.lastReply > SWEEP_GAP_MS);
    if (idle) current = { start: now(), cpuStart: process.cpuUsage(), calls: 0, replies: 0, errors: 0, lastReply: 0 };
    const sweep = current;
    sweep.calls++;
    const reply = original.call(this, sha, ...args);
    reply.then(
      () => finish(sweep),
      () => {
        sweep.errors++;
        finish(sweep);
      },
    );
    return reply;
  };
  return {
    sweeps,
    enable() {
      enabled = true;
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

/** Holds `size` locks until `sweeps` full sweeps were observed (bounded in time). */
async function measureSize(port, monitor, size, sweeps, expiryMs) {
  await monitor.flushall();
  const client = await connectClient(port);
  const extendSha = new Redlock([client]).scripts.extendScript.hash;
  const observer = observeSweeps(client, extendSha, size);
  let lost = 0;
  const locker = new RedisLocker(client, { expiry: expiryMs, onLockLost: () => lost++ });
  const releases = [];
  try {
    observer.enable();
    const fillStart = now();
    await forEachConcurrently(size, FILL_CONCURRENCY, async (i) => {
      const [acquired, release] = await locker.tryLock(undefined, `sweep:${i}`);
      if (!acquired) throw new Error(`sweeper: could not take sweep:${i}`);
      releases.push(release);
    });
    const fillMs = now() - fillStart;
    const deadline = now() + (sweeps + 2) * (expiryMs / 2) + 5000;
    while (observer.sweeps.length < sweeps && now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return { size, fillMs, heldCount: locker.heldCount, lost, sweeps: observer.sweeps.slice(0, sweeps) };
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
    const durationMs = median(measured.sweeps.map((s) => s.durationMs));
    results.push({
      ...measured,
      sweepsObserved: measured.sweeps.length,
      durationMs,
      cpuMs: median(measured.sweeps.map((s) => s.cpuMs)),
      extensionsPerSec: (size * 1000) / durationMs,
      targetMs,
      withinTarget: durationMs < targetMs,
    });
    log(`sweeper: ${size} locks done`);
  }
  return { config: { sizes, sweeps, expiryMs, intervalMs: expiryMs / 2, targetMs }, results };
}
