/**
 * A burst caller for scenario 22 (burst): a separate process with `lockers` RedisLockers, each on its
 * own connection to the lock server. For each "burst" it spins until the shared epoch instant, then
 * makes `calls` concurrent tryAcquire calls on one key spread over its lockers, in one synchronous
 * loop (the event loop is busy sending for a while), and reports what they ended with. A winner
 * keeps its lease until the parent — having heard from every process — tells it to release.
 *
 * Parent → burster: start {port, prefix, lockers, id}, burst {key, at, calls, expiry}, status {key},
 * release {key}, stop.
 * Burster → parent: ready, burst {key, winners, holding, refused, errors, firstError, ms},
 * status {key, holding}, released {key, outcomes}. "Holding": `assertHeld()` passes (not lost, and
 * the lease's deadline not passed), checked when the message is sent.
 */
import { RedisLocker } from "globallock";
import { Redis } from "ioredis";
import { now } from "./lib/clock.mjs";

let config;
const clients = [];
/** Lockers by expiry: a locker's expiry is its own option. */
const lockers = new Map();
/** Leases won in a burst, held until the parent says "release". */
const held = new Map();

/** Whether `lease` is still safely held (not lost, and its deadline not passed: checked now). */
function isHeld(lease) {
  try {
    lease.assertHeld();
    return true;
  } catch {
    return false;
  }
}

const send = (message) => process.send?.({ ...message, burster: config?.id });

function lockersFor(expiry) {
  let list = lockers.get(expiry);
  if (list === undefined) {
    list = clients.map((client) => new RedisLocker(client, { expiry, prefix: config.prefix }));
    lockers.set(expiry, list);
  }
  return list;
}

process.on("disconnect", () => process.exit(0));
process.on("message", async (message) => {
  if (message.type === "start") {
    config = message;
    for (let i = 0; i < config.lockers; i++) {
      const client = new Redis({ host: "127.0.0.1", port: config.port });
      client.on("error", () => undefined);
      clients.push(client);
    }
    await Promise.all(clients.map((client) => client.ping()));
    send({ type: "ready" });
  } else if (message.type === "burst") {
    const list = lockersFor(message.expiry);
    while (now() < message.at) {
      // busy-wait: every process starts its burst at the same instant
    }
    const started = now();
    const calls = [];
    for (let i = 0; i < message.calls; i++) calls.push(list[i % list.length].tryAcquire(undefined, message.key));
    const settled = await Promise.allSettled(calls);
    const ms = Math.round(now() - started);
    const winners = [];
    const errors = [];
    for (const result of settled) {
      if (result.status === "rejected") errors.push(result.reason);
      else if (result.value !== undefined) winners.push(result.value);
    }
    held.set(message.key, winners);
    send({
      type: "burst",
      key: message.key,
      winners: winners.length,
      holding: winners.filter(isHeld).length,
      refused: settled.length - winners.length - errors.length,
      errors: errors.length,
      firstError: errors[0] === undefined ? undefined : String(errors[0]),
      ms,
    });
  } else if (message.type === "status") {
    send({ type: "status", key: message.key, holding: (held.get(message.key) ?? []).filter(isHeld).length });
  } else if (message.type === "release") {
    const winners = held.get(message.key) ?? [];
    held.delete(message.key);
    const outcomes = await Promise.all(winners.map((lease) => lease.releaseWithOutcome()));
    send({ type: "released", key: message.key, outcomes });
  } else if (message.type === "stop") {
    for (const list of lockers.values()) await Promise.all(list.map((locker) => locker.close()));
    for (const client of clients) client.disconnect();
    process.exit(0);
  }
});
