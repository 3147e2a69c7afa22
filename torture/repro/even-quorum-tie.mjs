/**
 * Reproduction (run after `npm run build`):  node torture/repro/even-quorum-tie.mjs
 *
 * A RedisLocker over an EVEN number of Redis nodes hangs when the votes tie. redlock
 * 5.0.0-beta.2 settles an attempt only when a majority votes for or against it; with 2 (or 4)
 * nodes a 1–1 (2–2) split never settles, and globallock awaits it without a bound.
 *
 * 1. Two nodes, another token on node 0 only: `tryLock` never settles, nor does `close()`.
 * 2. Four nodes, a held lock whose key vanished on two of them (say they restarted empty): its
 *    extension ties 2–2 and never settles, so the sweeper never runs again and another, healthy
 *    lock of the same locker is lost too ("expired"), its keys gone from every node.
 */
import { RedisLocker } from "globallock";
import { killAllChildren } from "../lib/cleanup.mjs";
import { startServers } from "../lib/redis-server.mjs";

/** Describes how `promise` settled within `ms`. */
function settle(promise, ms) {
  return Promise.race([
    promise.then(
      (value) => `resolved (${Array.isArray(value) ? JSON.stringify(value[0]) : typeof value})`,
      (error) => `rejected (${error?.name}: ${error?.message})`,
    ),
    new Promise((resolve) => setTimeout(() => resolve(`STILL PENDING after ${ms} ms`), ms)),
  ]);
}

const servers = await startServers(4);
const admin = servers.map((server) => server.client());
const clients = [];
const connect = (count) => {
  const list = servers.slice(0, count).map((server) => server.client());
  clients.push(...list);
  return list;
};
try {
  await admin[0].set("globallock:tie", "someone-else", "PX", 1500);
  const two = new RedisLocker(connect(2), { expiry: 1000 });
  console.log("1. tryLock over 2 nodes, key held on 1:", await settle(two.tryLock(undefined, "tie"), 3000));
  console.log("   close():", await settle(two.close(), 3000));

  const lost = [];
  const four = new RedisLocker(connect(4), { expiry: 600, onLockLost: (e) => lost.push(`${e.key} ${e.reason}`) });
  const releaseVictim = await four.lock(undefined, "victim");
  const releaseHealthy = await four.lock(undefined, "healthy");
  await admin[0].del("globallock:victim");
  await admin[1].del("globallock:victim");
  await new Promise((resolve) => setTimeout(resolve, 2000));
  console.log("2. locks reported lost within 2 s (expiry 600 ms):", lost.join(", ") || "none");
  const healthy = await Promise.all(admin.map((c) => c.exists("globallock:healthy")));
  console.log("   'healthy' key present per node:", healthy.join(","), "(it was never touched)");
  console.log("   close():", await settle(four.close(), 3000));
  await releaseVictim();
  await releaseHealthy();
} finally {
  for (const client of [...admin, ...clients]) client.disconnect();
  await Promise.all(servers.map((server) => server.stop()));
  killAllChildren();
  process.exit(0); // the hung attempts would keep the process alive
}
