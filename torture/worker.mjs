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
 * Parent → worker: start {config}, go, arm {hold} (the hold may carry `weight` or `role`: they apply
 * from the next attempt), setHold {min,max,role?} (role: only that role's sections), setWriterShare
 * {share}, pause (finish the attempt or section under way, then wait; acknowledged by "paused"),
 * resume, stop.
 * Worker → parent: ready, acquired, entered, lost, released, acquireError, special, paused,
 * unhandled, done {stats} (with the locker's `leaseStats` for a RedisLocker).
 *
 * The lock connections go to `config.lockPorts` on `config.lockHost` (one client per port: one node or a quorum; a
 * scenario may point them at a TCP proxy), or, with `config.sentinel` ({ ports, name }), one ioredis
 * Sentinel client that finds the master itself. With `config.abortWaits` ({ chance, minMs, maxMs }),
 * that share of attempts gets a short, seeded AbortSignal timeout instead of `acquireTimeoutMs`.
 *
 * `config.mode` "file": a `FileLocker` on `config.directory` (the lock files of this host; no lock
 * server). `config.mode` "etcd": an `EtcdLocker` on one `Etcd3` client (npm `etcd3`) with every
 * endpoint of `config.etcdEndpoints` (a member that dies is failed over by the client), fenced
 * like the Redis workers: its tokens are the entries' create revisions.
 *
 * Counted locks (`config.mode`): "semaphore" — a `RedisSemaphore` with `config.limit`; each section
 * takes a seeded weight in `config.weights` ({ min, max }), enters the referee with that weight
 * against the limit (C1 counts permits), holds, and counts as a shared completion (no C2 counter:
 * holders legitimately overlap). "rw" — a `RedisReadWriteLocker`; each section is a writer with
 * probability `config.writerShare`, else a reader. A writer is a lock holder (fencing, C2, C3) that
 * enters the referee with the weight of every permit (`RW_WRITER_WEIGHT`), a reader enters with 1
 * and only reads the counter, so C1 sees a writer with anyone, or two writers, as an overlap.
 */
import { Etcd3 } from "etcd3";
import {
  EtcdLocker,
  FileLocker,
  fencedWrite,
  MemoryLocker,
  RedisLocker,
  RedisReadWriteLocker,
  RedisSemaphore,
} from "globallock";
import { Redis } from "ioredis";
import { busyWait, now, sleep } from "./lib/clock.mjs";
import { Prng } from "./lib/prng.mjs";
import { RESILIENT_CLIENT } from "./lib/redis-server.mjs";
import { compareTokens, RefereeRecorder, RW_WRITER_WEIGHT } from "./lib/referee.mjs";

/** @type {any} */
let config;
let rng;
let referee;
let locker;
/** @type {Redis[]} */
const clients = [];
/** Mode "etcd": the worker's etcd client (closed at teardown, after the locker). */
let etcdClient;
let holdRange;
/** Hold ranges of one role only (set by a "setHold" with a role), over `holdRange`. */
const holdByRole = {};
/** Mode "rw": the share of sections that are writers. */
let writerShare = 0;
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
      if (message.role === undefined) holdRange = { min: message.min, max: message.max };
      else holdByRole[message.role] = { min: message.min, max: message.max };
      break;
    case "setWriterShare":
      writerShare = message.share;
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
  writerShare = config.writerShare ?? 0;
  // A worker inside a network namespace (config.netns) reaches the referee through its Unix socket.
  const refereeAt = config.refereePath ? { path: config.refereePath } : { host: "127.0.0.1", port: config.refereePort };
  const refereeClient = new Redis({ ...refereeAt, ...RESILIENT_CLIENT });
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
  } else if (config.mode === "semaphore" || config.mode === "rw") {
    const client = new Redis({ host: config.lockHost, port: config.lockPorts[0], ...RESILIENT_CLIENT });
    client.on("error", () => undefined);
    clients.push(client);
    await client.ping();
    const options = { ...config.lockerOptions, prefix: config.prefix };
    locker =
      config.mode === "semaphore"
        ? new RedisSemaphore(client, { ...options, limit: config.limit })
        : new RedisReadWriteLocker(client, options);
  } else if (config.mode === "memory") {
    locker = new MemoryLocker();
  } else if (config.mode === "file") {
    // The lock options of every mode (expiry, backoff) but Redis's operationTimeout.
    const { operationTimeout: _unused, ...options } = config.lockerOptions;
    locker = new FileLocker({ ...options, directory: config.directory });
  } else if (config.mode === "etcd") {
    etcdClient = new Etcd3({ hosts: config.etcdEndpoints });
    locker = new EtcdLocker(etcdClient, { ...config.lockerOptions, prefix: config.prefix });
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
  return config.lockPorts.map((port) => new Redis({ host: config.lockHost, port, ...RESILIENT_CLIENT }));
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

/**
 * What one section takes: its role ("" for a lock, "permit" for a semaphore, "read" or "write"),
 * its weight in the locker, how it counts on the referee (weight against limit), whether it writes
 * (C2 counter and C3 fenced writes, as a lock holder does) and whether it asks for a fencing token.
 * An armed special section may fix the weight or the role.
 */
function planSection(special) {
  if (config.mode === "semaphore") {
    const weight = special?.weight ?? rng.int(config.weights.min, config.weights.max);
    return { role: "", weight, referee: { weight, limit: config.limit }, writes: false, fencing: false };
  }
  if (config.mode === "rw") {
    const role = special?.role ?? (rng.next() < writerShare ? "write" : "read");
    const writer = role === "write";
    const referee = { weight: writer ? RW_WRITER_WEIGHT : 1, limit: RW_WRITER_WEIGHT, role };
    return { role, weight: 1, referee, writes: writer, fencing: writer && config.fencing };
  }
  return { role: "", weight: 1, referee: undefined, writes: true, fencing: config.fencing };
}

/** The locker of a section's role (a read-write locker's view). */
function lockerFor(plan) {
  return config.mode === "rw" ? locker[plan.role] : locker;
}

/** Waits for the lock; resolves to the lease, or undefined when the attempt failed or was interrupted. */
async function acquire(key, timeoutMs, plan) {
  if (config.mode === "none") return fakeLease();
  const startedAt = now();
  const signal = AbortSignal.any([interrupt.signal, AbortSignal.timeout(timeoutMs)]);
  const options = config.mode === "semaphore" ? { weight: plan.weight } : { fencing: plan.fencing };
  try {
    return await lockerFor(plan).acquire(signal, key, options);
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
  // A special section that fixes the weight or role is taken before the attempt (it shapes it);
  // any other is taken by the first task that acquires.
  const shapesAttempt = (hold) => hold?.weight !== undefined || hold?.role !== undefined;
  let special;
  if (shapesAttempt(armed)) {
    special = armed;
    armed = undefined;
  }
  const plan = planSection(special);
  const lease = await acquire(key, timeoutMs, plan);
  if (lease === undefined) {
    armed ??= special;
    return false;
  }
  const holderId = `${config.id}.${task}`;
  if (special === undefined && !shapesAttempt(armed)) {
    special = armed;
    armed = undefined;
  }
  const token = lease.fencingToken?.toString();
  const acquiredAt = now();
  stats.acquired += 1;
  send({
    type: "acquired",
    key,
    task,
    attempt,
    token,
    role: plan.role,
    weight: plan.weight,
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
      plan.referee,
    );
    entered = true;
    if (special !== undefined) {
      send({ type: "entered", key, task, attempt, token, holderId, role: plan.role, weight: plan.weight, t: now() });
    }
    const value = config.mode === "semaphore" ? 0 : await referee.readCounter(key);
    blockEndedAt = await hold(special, plan.role);
    if (plan.writes) await referee.writeCounter(key, value + 1);
    else await referee.completeShared(key);
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
async function hold(special, role) {
  if (special === undefined) {
    const range = holdByRole[role] ?? holdRange;
    const ms = rng.int(range.min, range.max);
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
  const keeper = config.mode === "rw" ? locker?.write : locker;
  if (keeper?.leaseStats !== undefined) stats.leaseStats = keeper.leaseStats;
  for (const client of clients) client.disconnect();
  etcdClient?.close();
  finished = true;
  send({ type: "done", stats, t: now() });
  process.disconnect();
}
