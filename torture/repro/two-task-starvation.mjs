/**
 * Reproduction (run after `npm run build`):  node torture/repro/two-task-starvation.mjs
 *
 * Cross-process hand-off can starve a process. Two lockers on one Redis node (standing for two
 * processes, P and X), each running two tasks that loop lock → 1 ms → release on one key, every
 * lock with a 3 s timeout; X's tasks start 100 ms after P's. Fair service would keep every wait
 * short (at most three others ahead, each holding ~1 ms). Instead, usually within a few seconds,
 * one locker's tasks wait until their 3 s timeout while the other's two tasks keep handing the key
 * to each other.
 * Found by scenario 10 (script-flush): waits of 1–1.4 s that end only when the parent pauses the
 * other workers for a probe.
 *
 * What it shows besides (read with MONITOR and by sampling the queue): during the longest wait,
 * how often the waiter's locker was in the key's grant queue, and how many hand-offs (grants,
 * or reservations on older builds) went to each locker. Seen on c69ace6 (either locker may be the
 * one starved): the starved locker is missing from the queue for its whole wait, and every
 * hand-off goes to the other one — a waiting task that
 * makes no attempt does not join the queue, and each hand-off to another locker restarts its
 * safety-net poll ("postponed"), so with hand-offs every millisecond or two the poll never fires.
 * (Also reproduced on 7d00892, with reservations instead of grants.) Fixed in 020c965: a head
 * postponed by grants to other lockers still tries within backoff.max of its last try, and a call
 * behind its own locker's holder joins the grant queue at once; since then no wait times out.
 */
import { RedisLocker } from "globallock";
import { killAllChildren } from "../lib/cleanup.mjs";
import { startServer } from "../lib/redis-server.mjs";

const RUN_MS = 6000;
const TIMEOUT_MS = 3000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const server = await startServer();
const clients = [server.client(), server.client(), server.client(), server.client()];
const [pClient, xClient, admin, monitorClient] = clients;
const P = new RedisLocker(pClient, { expiry: 1000, backoff: { min: 20, max: 250 } });
const X = new RedisLocker(xClient, { expiry: 1000, backoff: { min: 20, max: 250 } });
const queueKey = "{globallock:k}:queue";
let stop = false;
const stats = {};
const waits = [];

/** Learns a locker's waiter id: it joins the queue of a key held by someone else. */
async function waiterIdOf(locker, key) {
  await admin.set(`globallock:${key}`, "someone-else", "PX", 200);
  const waiting = locker.lock(AbortSignal.timeout(2000), key);
  let id;
  for (let i = 0; i < 100 && id === undefined; i++) {
    await sleep(5);
    id = (await admin.zrange(`{globallock:${key}}:queue`, 0, -1))[0];
  }
  await (await waiting)();
  return id;
}

async function task(locker, name) {
  const mine = { sections: 0, longestWaitMs: 0, timedOut: 0 };
  stats[name] = mine;
  while (!stop) {
    const started = performance.now();
    let ok = false;
    try {
      const release = await locker.lock(AbortSignal.timeout(TIMEOUT_MS), "k");
      ok = true;
      await sleep(1);
      await release();
      mine.sections += 1;
    } catch {
      mine.timedOut += 1;
    }
    const ended = performance.now();
    mine.longestWaitMs = Math.max(mine.longestWaitMs, Math.round(ended - started));
    waits.push({ name, started, ended, ok });
  }
}

try {
  const ids = { P: await waiterIdOf(P, "probe-p"), X: await waiterIdOf(X, "probe-x") };
  const nameOf = (id) => Object.keys(ids).find((k) => ids[k] === id) ?? "?";
  // Hand-offs in the server's order: grants ("g:<id>:…") or, on older builds, reservations.
  const handOffs = [];
  const monitor = await monitorClient.monitor();
  monitor.on("monitor", (_time, args, source) => {
    if (source !== "lua") return;
    const [command, key, value] = args.map(String);
    if (key !== "globallock:k") return;
    if (command === "publish" && value.startsWith("g:"))
      handOffs.push({ t: performance.now(), to: nameOf(value.split(":")[1]) });
    if (command === "set" && value.startsWith("reserved:"))
      handOffs.push({ t: performance.now(), to: nameOf(value.slice(9)) });
  });
  const samples = [];
  const sampler = (async () => {
    while (!stop) {
      samples.push({ t: performance.now(), queue: (await admin.zrange(queueKey, 0, -1)).map(nameOf) });
      await sleep(10);
    }
  })();

  // P's tasks start first; X's join 100 ms later, one after the other.
  const tasks = [task(P, "P.0"), task(P, "P.1")];
  await sleep(100);
  tasks.push(task(X, "X.0"));
  await sleep(10);
  tasks.push(task(X, "X.1"));
  await sleep(RUN_MS);
  stop = true;
  await Promise.all([...tasks, sampler]);
  monitor.disconnect();

  console.log(`two lockers × two tasks, one key, ${RUN_MS} ms, lock timeout ${TIMEOUT_MS} ms:`);
  for (const [name, s] of Object.entries(stats)) {
    console.log(`  ${name}: ${s.sections} sections, longest wait ${s.longestWaitMs} ms, ${s.timedOut} timed out`);
  }
  const longest = waits.sort((a, b) => b.ended - b.started - (a.ended - a.started))[0];
  if (longest !== undefined) {
    const locker = longest.name.slice(0, 1);
    const during = (t) => t >= longest.started && t <= longest.ended;
    const inQueue = samples.filter((s) => during(s.t));
    const queued = inQueue.filter((s) => s.queue.includes(locker)).length;
    const to = { P: 0, X: 0 };
    for (const h of handOffs.filter((h) => during(h.t))) to[h.to] = (to[h.to] ?? 0) + 1;
    console.log(
      `  longest wait: ${longest.name}, ${Math.round(longest.ended - longest.started)} ms ` +
        `(${longest.ok ? "granted" : "timed out"}); meanwhile ${locker}'s locker was in the grant queue in ` +
        `${queued} of ${inQueue.length} samples, and the key was handed off ${to.P} times to P, ${to.X} times to X`,
    );
  }
  const timedOut = Object.values(stats).reduce((n, s) => n + s.timedOut, 0);
  console.log(timedOut > 0 ? `STARVED: ${timedOut} waits timed out after ${TIMEOUT_MS} ms` : "no wait timed out");
} finally {
  stop = true;
  await Promise.all([P.close(), X.close()]);
  for (const client of clients) client.disconnect();
  await server.stop();
  killAllChildren();
}
