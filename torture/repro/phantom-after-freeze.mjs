/**
 * Reproduction (run after `npm run build`):  node torture/repro/phantom-after-freeze.mjs
 *
 * On one Redis node, an acquisition that times out in the client (`operationTimeout`) while Redis
 * is frozen is still executed by Redis when it resumes: the key is then held by a token nobody
 * owns, and every locker waits a whole `expiry` for it (here 2 s; 30 s with the default expiry).
 * Nothing unsafe happens; the lock is just unavailable for `expiry`.
 */
import { RedisLocker } from "globallock";
import { killAllChildren } from "../lib/cleanup.mjs";
import { startServer } from "../lib/redis-server.mjs";

const server = await startServer();
const clients = [server.client(), server.client(), server.client()];
const [a, b, admin] = clients;
const locker = new RedisLocker(a, { expiry: 2000 });
const other = new RedisLocker(b, { expiry: 2000 });
try {
  // Load the scripts first: a first EVALSHA would only answer NOSCRIPT.
  for (const l of [locker, other]) {
    const [, release] = await l.tryLock(undefined, "warm-up");
    await release();
  }
  server.pause();
  const error = await locker.tryLock(undefined, "k").catch((e) => e);
  console.log("tryLock while Redis is frozen:", error?.code);
  server.resume();
  await new Promise((resolve) => setTimeout(resolve, 50));
  console.log(
    "50 ms after SIGCONT the key holds",
    JSON.stringify(await admin.get("globallock:k")),
    "with TTL",
    await admin.pttl("globallock:k"),
    "ms",
  );
  const started = Date.now();
  const release = await other.lock(AbortSignal.timeout(10_000), "k");
  console.log("another locker got the (unowned) lock after", Date.now() - started, "ms");
  await release();
} finally {
  await locker.close();
  await other.close();
  for (const client of clients) client.disconnect();
  await server.stop();
  killAllChildren();
}
