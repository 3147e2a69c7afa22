/**
 * A FileLocker process for scenarios 23 (file-burst) and 24 (file-clock-step), on the run's lock
 * directory; its wall clock may be stepped by libfaketime (the parent sets its environment). Every
 * holder enters the referee (C1) when it gets a lock and leaves it when told to release, so two
 * holders at once are an overlap. Times it reports are ms on the boot's monotonic clock
 * (`process.hrtime`), which every process of the host shares and no wall-clock step moves.
 *
 * Parent → peer: start {directory, expiry, backoff, refereePort, namespace, id},
 *   burst {key, calls, at} (at `at`, `calls` concurrent tryAcquire; a lease won is kept),
 *   acquire {key} (a waiting acquire; the lease is kept), release {key}, clock, stop.
 * Peer → parent: ready {pid}, burst {key, wins, errors, elapsedMs}, acquired {key, t},
 *   acquireError {key, error}, lost {key, reason, t}, released {key, outcome}, clock {now}.
 */
import { FileLocker } from "globallock";
import { Redis } from "ioredis";
import { RESILIENT_CLIENT } from "./lib/redis-server.mjs";
import { RefereeRecorder } from "./lib/referee.mjs";

let config;
let locker;
let client;
let referee;
/** Leases held, by key. */
const held = new Map();

const send = (message) => process.send?.({ ...message, peer: config?.id });
const monotonic = () => Number(process.hrtime.bigint()) / 1e6;
const describe = (error) => String(error?.message ?? error);

/** Keeps a lease won: enters the referee, reports a loss. */
async function hold(key, lease) {
  held.set(key, lease);
  lease.lost.addEventListener("abort", () =>
    send({ type: "lost", key, reason: lease.lost.reason?.reason, t: monotonic() }),
  );
  await referee.enter(key, config.id, { pid: process.pid, t: Math.round(monotonic()) }, "");
}

process.on("disconnect", () => process.exit(0));
process.on("message", async (message) => {
  if (message.type === "start") {
    config = message;
    locker = new FileLocker({ directory: config.directory, expiry: config.expiry, backoff: config.backoff });
    client = new Redis({ host: "127.0.0.1", port: config.refereePort, ...RESILIENT_CLIENT });
    client.on("error", () => undefined);
    referee = new RefereeRecorder(client, config.namespace);
    await client.ping();
    send({ type: "ready", pid: process.pid });
  } else if (message.type === "burst") {
    while (monotonic() < message.at) {
      // busy-wait: every peer fires at the same instant
    }
    const startedAt = monotonic();
    const results = await Promise.allSettled(
      Array.from({ length: message.calls }, () => locker.tryAcquire(undefined, message.key)),
    );
    const elapsedMs = monotonic() - startedAt;
    const won = results.filter((r) => r.status === "fulfilled" && r.value !== undefined).map((r) => r.value);
    const errors = results.filter((r) => r.status === "rejected").map((r) => describe(r.reason));
    for (const lease of won) await hold(message.key, lease);
    send({ type: "burst", key: message.key, wins: won.length, errors, elapsedMs });
  } else if (message.type === "acquire") {
    try {
      const lease = await locker.acquire(undefined, message.key);
      const t = monotonic();
      await hold(message.key, lease);
      send({ type: "acquired", key: message.key, t });
    } catch (error) {
      send({ type: "acquireError", key: message.key, error: describe(error) });
    }
  } else if (message.type === "release") {
    const lease = held.get(message.key);
    held.delete(message.key);
    await referee.exit(message.key, config.id);
    send({ type: "released", key: message.key, outcome: await lease?.releaseWithOutcome() });
  } else if (message.type === "clock") {
    send({ type: "clock", now: Date.now() });
  } else if (message.type === "stop") {
    await locker?.close();
    client?.disconnect();
    process.disconnect();
  }
});
