/**
 * A stale-lock stealer for scenario 20 (file-stale-race): a separate process with one FileLocker on
 * the run's lock directory. For each "race" it spins until the shared epoch instant, makes ONE
 * attempt (tryAcquire with fencing) at a lock whose holder's deadline has passed, and, when it won,
 * enters the referee (C1) and stays inside, holding the lock, until the parent — having heard from
 * every stealer — tells it to release: two winners of one round would be two holders at once.
 *
 * Parent → stealer: start {directory, refereePort, namespace, id}, race {key, at}, release {key}, stop.
 * Stealer → parent: ready, raced {key, won, lostRace, token, error}, released {key, outcome}.
 */
import { FileLocker } from "globallock";
import { Redis } from "ioredis";
import { now } from "./lib/clock.mjs";
import { RESILIENT_CLIENT } from "./lib/redis-server.mjs";
import { RefereeRecorder } from "./lib/referee.mjs";

let config;
let locker;
let client;
let referee;
/** The lease won in a round, held until the parent says "release". */
const held = new Map();

const send = (message) => process.send?.({ ...message, stealer: config?.id });

process.on("disconnect", () => process.exit(0));
process.on("message", async (message) => {
  if (message.type === "start") {
    config = message;
    locker = new FileLocker({ directory: config.directory, expiry: 1000 });
    client = new Redis({ host: "127.0.0.1", port: config.refereePort, ...RESILIENT_CLIENT });
    client.on("error", () => undefined);
    referee = new RefereeRecorder(client, config.namespace);
    await client.ping();
    send({ type: "ready" });
  } else if (message.type === "race") {
    while (now() < message.at) {
      // busy-wait: every stealer attempts at the same instant
    }
    const before = locker.stats.lostTakeoverRaces;
    try {
      const lease = await locker.tryAcquire(undefined, message.key, { fencing: true });
      const lostRace = locker.stats.lostTakeoverRaces > before;
      if (lease === undefined) {
        send({ type: "raced", key: message.key, won: false, lostRace });
        return;
      }
      const token = lease.fencingToken.toString();
      await referee.enter(message.key, config.id, { pid: process.pid, t: Math.round(now()) }, token);
      held.set(message.key, lease);
      send({ type: "raced", key: message.key, won: true, lostRace, token });
    } catch (error) {
      send({ type: "raced", key: message.key, won: false, error: String(error?.message ?? error) });
    }
  } else if (message.type === "release") {
    const lease = held.get(message.key);
    held.delete(message.key);
    await referee.exit(message.key, config.id);
    send({ type: "released", key: message.key, outcome: await lease?.releaseWithOutcome() });
  } else if (message.type === "stop") {
    await locker?.close();
    client?.disconnect();
    process.disconnect();
  }
});
