/**
 * One torture worker: a separate Node.js process (so that it can be SIGSTOPped or SIGKILLed) that
 * loops lock → critical section → release on shared keys, with the built `globallock` package,
 * recording every step on the referee (see lib/referee.mjs) and reporting events to its parent over
 * IPC. Its critical section:
 *
 *   acquire (fencing when enabled) → fenced "claim" write → referee entry (C1; registers the token)
 *   → read counter (C2) → hold (sleep; or, when armed, a long sleep or a busy-wait) → write counter
 *   → fenced "commit" write (C3) → referee exit → releaseWithOutcome
 *
 * It does not check its lease before writing, on purpose: it is the naive holder whose overlaps the
 * checkers must see, and whose stale writes the fenced resource must refuse.
 *
 * Parent → worker: start {config}, go, arm {hold}, setHold {min,max}, pause (finish the attempt or
 * section under way, then wait; acknowledged by "paused"), resume, stop.
 * Worker → parent: ready, acquired, entered, lost, released, acquireError, special, paused,
 * unhandled, done {stats} (with the locker's `leaseStats` for a RedisLocker).
 *
 * The lock connections go to `config.lockPorts` (one client per port: one node or a quorum; a
 * scenario may point them at a TCP proxy), or, with `config.sentinel` ({ ports, name }), one ioredis
 * Sentinel client that finds the master itself. With `config.abortWaits` ({ chance, minMs, maxMs }),
 * that share of attempts gets a short, seeded AbortSignal timeout instead of `acquireTimeoutMs`.
 */
import { fencedWrite, MemoryLocker, RedisLocker } from "globallock";
import { Redis } from "ioredis";
import { busyWait, now, sleep } from "./lib/clock.mjs";
import { Prng } from "./lib/prng.mjs";
import { RESILIENT_CLIENT } from "./lib/redis-server.mjs";
import { compareTokens, RefereeRecorder } from "./lib/referee.mjs";

/** @type {any} */
let config;
let rng;
let referee;
let locker;
/** @type {Redis[]} */
const clients = [];
let holdRange;
/** Next special section, set by an "arm" message and taken by the first task that acquires. */
let armed;
let stopping = false;
let finished = false;
/** Aborted on stop, so that a waiting acquisition gives up at once. */
const interrupt = new AbortController();
let paused = false;
let resumed;
let releaseResumed = () => undefined;

const stats = {
  sections: 0,
  acquired: 0,
  errors: {},
  unexpected: [],
  lost: {},
  releaseOutcomes: {},
  fenced: { staleAccepted: 0, staleRejected: 0, currentAccepted: 0, currentRejected: 0 },
  unhandled: 0,
  lastFailedAttemptAt: undefined,
};

/** Sends a message to the parent; a vanished parent is not an error here (we exit on disconnect). */
function send(message) {
  try {
    process.send?.({ ...message, worker: config?.id });
  } catch {
    // the parent is gone
  }
}

function count(map, key) {
  map[key] = (map[key] ?? 0) + 1;
}

function noteUnexpected(where, error) {
  if (stats.unexpected.length < 10) stats.unexpected.push(`${where}: ${error?.stack ?? String(error)}`);
  send({ type: "unexpected", where, message: String(error?.message ?? error), t: now() });
}

process.on("unhandledRejection", (reason) => {
  stats.unhandled += 1;
  send({ type: "unhandled", kind: "unhandledRejection", message: String(reason?.stack ?? reason), t: now() });
});
process.on("uncaughtException", (error) => {
  stats.unhandled += 1;
  send({ type: "unhandled", kind: "uncaughtException", message: String(error?.stack ?? error), t: now() });
});
// The parent died: never linger. (After "done" we disconnect ourselves and must then exit on our
// own, with no handle left open: the parent reports a worker that does not.)
process.on("disconnect", () => {
  if (!finished) process.exit(2);
});

process.on("message", (message) => {
  switch (message.type) {
    case "start":
      void setUp(message.config).catch((error) => {
        noteUnexpected("setup", error);
        process.exit(3);
      });
      break;
    case "go":
      void runAll();
      break;
    case "arm":
      armed = message.hold;
      break;
    case "setHold":
      holdRange = { min: message.min, max: message.max };
      break;
    case "pause":
      // Gates new attempts only: an attempt in flight settles first, so "paused" means quiet.
      paused = true;
      resumed = new Promise((resolve) => {
        releaseResumed = resolve;
      });
      break;
    case "resume":
      paused = false;
      releaseResumed();
      break;
    case "stop":
      stopping = true;
      interrupt.abort(new Error("stopping"));
      releaseResumed();
      break;
  }
});

async function setUp(received) {
  config = received;
  rng = new Prng(config.seed);
  holdRange = { ...config.hold };
  const refereeClient = new Redis({ host: "127.0.0.1", port: config.refereePort, ...RESILIENT_CLIENT });
  refereeClient.on("error", () => undefined);
  clients.push(refereeClient);
  referee = new RefereeRecorder(refereeClient, config.namespace);
  await refereeClient.ping();
  if (config.mode === "redis") {
    const lockClients = lockConnections().map((client) => {
      client.on("error", () => undefined);
      clients.push(client);
      return client;
    });
    await Promise.all(lockClients.map((client) => client.ping()));
    locker = new RedisLocker(lockClients.length === 1 ? lockClients[0] : lockClients, {
      ...config.lockerOptions,
      prefix: config.prefix,
    });
  } else if (config.mode === "memory") {
    locker = new MemoryLocker();
  }
  send({ type: "ready", pid: process.pid, t: now() });
}

/** The lock connections: one per lock port, or one Sentinel client (it finds the master itself). */
function lockConnections() {
  const sentinel = config.sentinel;
  if (sentinel) {
    const sentinels = sentinel.ports.map((port) => ({ host: "127.0.0.1", port }));
    return [new Redis({ sentinels, name: sentinel.name, ...RESILIENT_CLIENT, sentinelRetryStrategy: () => 50 })];
  }
  return config.lockPorts.map((port) => new Redis({ host: "127.0.0.1", port, ...RESILIENT_CLIENT }));
}

async function runAll() {
  const tasks = Array.from({ length: config.tasks }, (_, task) => taskLoop(task));
  await Promise.allSettled(tasks);
  await tearDown();
}

async function taskLoop(task) {
  let completed = 0;
  let attempt = 0;
  while (!stopping && (config.sections === null || completed < config.sections)) {
    if (paused) {
      send({ type: "paused", task, t: now() });
      await resumed;
      continue;
    }
    if (await section(task, attempt++)) completed += 1;
  }
}

/** The control run's stand-in for a lease: no lock at all, and a fixed token per worker. */
function fakeLease() {
  return {
    fencingToken: BigInt(config.index + 1),
    lost: new AbortController().signal,
    releaseWithOutcome: async () => "released",
  };
}

/** This attempt's timeout: usually `acquireTimeoutMs`; with `abortWaits`, sometimes a short one. */
function attemptTimeout() {
  const abort = config.abortWaits;
  if (abort && rng.next() < abort.chance) return rng.int(abort.minMs, abort.maxMs);
  return config.acquireTimeoutMs;
}

/** Waits for the lock; resolves to the lease, or undefined when the attempt failed or was interrupted. */
async function acquire(key, timeoutMs) {
  if (config.mode === "none") return fakeLease();
  const startedAt = now();
  const signal = AbortSignal.any([interrupt.signal, AbortSignal.timeout(timeoutMs)]);
  try {
    return await locker.acquire(signal, key, { fencing: config.fencing });
  } catch (error) {
    if (interrupt.signal.aborted && error === interrupt.signal.reason) return undefined;
    // A library error has a string code; a DOMException's numeric code means nothing here.
    const code = typeof error?.code === "string" ? error.code : (error?.name ?? "unknown");
    count(stats.errors, code);
    stats.lastFailedAttemptAt = now();
    send({
      type: "acquireError",
      code,
      name: error?.name,
      message: String(error?.message),
      timeoutMs,
      startedAt,
      t: now(),
    });
    if (!String(code).startsWith("ERR_GLOBALLOCK_") && code !== "TimeoutError") noteUnexpected("acquire", error);
    await sleep(rng.int(config.errorRetryMs / 2, config.errorRetryMs));
    return undefined;
  }
}

/** One lock → critical section → release. Resolves to true when the section completed. */
async function section(task, attempt) {
  const key = rng.pick(config.keys);
  const startedAt = now();
  const timeoutMs = attemptTimeout();
  const lease = await acquire(key, timeoutMs);
  if (lease === undefined) return false;
  const holderId = `${config.id}.${task}`;
  const special = armed;
  armed = undefined;
  const token = lease.fencingToken?.toString();
  const acquiredAt = now();
  stats.acquired += 1;
  send({
    type: "acquired",
    key,
    task,
    attempt,
    token,
    timeoutMs,
    startedAt,
    t: acquiredAt,
    special: special !== undefined,
  });
  let lostAt;
  let lostReason;
  const onLost = () => {
    lostAt = now();
    lostReason = lease.lost.reason?.reason ?? String(lease.lost.reason);
    count(stats.lost, lostReason);
    send({ type: "lost", key, task, attempt, reason: lostReason, t: lostAt, special: special !== undefined });
  };
  lease.lost.addEventListener("abort", onLost, { once: true });
  let entered = false;
  let completed = false;
  let commit;
  let blockEndedAt;
  try {
    if (token !== undefined) await fenced(key, token, `${holderId}#${attempt}:claim`);
    await referee.enter(
      key,
      holderId,
      { pid: process.pid, attempt, token: token ?? null, t: Math.round(now()) },
      token,
    );
    entered = true;
    if (special !== undefined) send({ type: "entered", key, task, attempt, token, holderId, t: now() });
    const value = await referee.readCounter(key);
    blockEndedAt = await hold(special);
    await referee.writeCounter(key, value + 1);
    if (token !== undefined) commit = await fenced(key, token, `${holderId}#${attempt}:commit`);
    completed = true;
    stats.sections += 1;
  } catch (error) {
    noteUnexpected("critical section", error);
  } finally {
    if (entered) await referee.exit(key, holderId).catch((error) => noteUnexpected("referee exit", error));
    lease.lost.removeEventListener("abort", onLost);
  }
  const releaseStartedAt = now();
  const outcome = await lease.releaseWithOutcome();
  count(stats.releaseOutcomes, outcome);
  send({ type: "released", key, task, attempt, outcome, t: now() });
  if (special !== undefined) {
    send({
      type: "special",
      key,
      holderId,
      token,
      acquiredAt,
      lostAt,
      lostReason,
      blockEndedAt,
      commit,
      releaseStartedAt,
      releaseOutcome: outcome,
      completed,
      t: now(),
    });
  }
  return completed;
}

/**
 * The pause inside the section: a seeded short sleep, or what the parent armed (a long sleep, or a
 * busy-wait that blocks the event loop, then an optional sleep). Resolves to when a busy-wait ended.
 */
async function hold(special) {
  if (special === undefined) {
    const ms = rng.int(holdRange.min, holdRange.max);
    if (ms > 0) await sleep(ms);
    else await new Promise((resolve) => setImmediate(resolve));
    return;
  }
  let blockEndedAt;
  if (special.kind === "block") {
    busyWait(special.ms);
    blockEndedAt = now();
  } else {
    await sleep(special.ms);
  }
  if (special.thenSleepMs) await sleep(special.thenSleepMs);
  return blockEndedAt;
}

/** A fenced write of the resource, classified as stale or current against the referee's registry. */
async function fenced(key, token, value) {
  const highestBefore = await referee.highestGranted(key);
  const stale = highestBefore !== null && compareTokens(token, highestBefore) < 0;
  const resource = referee.keys.resource(key);
  const accepted =
    config.writer === "unfenced"
      ? await referee.unfencedWrite(key, token, value)
      : await fencedWrite(referee.client, resource, BigInt(token), value);
  const field = `${stale ? "stale" : "current"}${accepted ? "Accepted" : "Rejected"}`;
  stats.fenced[field] += 1;
  await referee.recordWrite(key, stale, accepted, { token, highestBefore, value, t: now() });
  return { stale, accepted, token, highestBefore };
}

async function tearDown() {
  try {
    await locker?.close();
  } catch (error) {
    noteUnexpected("close", error);
  }
  // What the lease keeper measured (RedisLocker only): extensions, batches, retries, least headroom.
  if (locker?.leaseStats !== undefined) stats.leaseStats = locker.leaseStats;
  for (const client of clients) client.disconnect();
  finished = true;
  send({ type: "done", stats, t: now() });
  process.disconnect();
}
