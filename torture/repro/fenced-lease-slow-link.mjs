/**
 * Reproduction (run after `npm run build`):  node torture/repro/fenced-lease-slow-link.mjs [one-way ms]
 *
 * On a slow link, a lease acquired with `{ fencing: true }` is lost at its first extension even
 * though every command answers well within `operationTimeout`. The lease keeper starts keeping a
 * lease only once its fencing token has arrived (a second round trip after the grant), so the
 * first extension — due half a lease after the grant, and early enough that an answer within
 * `operationTimeout` lands before the deadline — is sent one round trip late. With expiry 2000,
 * operationTimeout 900 and a 700 ms round trip (350 ms each way, default here), grant + token take
 * ~1400 ms, the extension answers at ~2100 ms, and the deadline (~1978 ms) passes first: the lease
 * is declared lost ("expired"). The same lease without fencing is kept (its first extension is
 * sent at ~983 ms). Scenario 9 (slow-link, 300 ms each way) passed on that build (7d00892–
 * b33e9ae) with ~170 ms of headroom left. Fixed in dc53426 (the acquire script issues the fencing
 * token itself, and a grant is kept from the moment it is granted): since then both leases are kept.
 */
import { RedisLocker } from "globallock";
import { TcpProxy } from "../../support/tcp-proxy.mjs";
import { killAllChildren } from "../lib/cleanup.mjs";
import { startServer } from "../lib/redis-server.mjs";

const oneWay = Number(process.argv[2] ?? 350);
const server = await startServer();
const proxy = await TcpProxy.start(server.port, { latencyMs: oneWay });
const client = server.client({ port: proxy.port });
const lost = [];
const locker = new RedisLocker(client, {
  expiry: 2000,
  operationTimeout: 900,
  onLockLost: (error) => lost.push(`${error.key}: ${error.reason}`),
});
try {
  await client.ping(); // connected (and ready-checked) before the clock starts
  console.log(`round trip ${2 * oneWay} ms, expiry 2000, operationTimeout 900`);
  for (const fencing of [false, true]) {
    const key = fencing ? "fenced" : "plain";
    const started = performance.now();
    const lease = await locker.acquire(undefined, key, { fencing });
    const acquiredAfter = Math.round(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    console.log(
      `fencing ${fencing}: acquired after ${acquiredAfter} ms; 3 s later lost: ${lease.lost.aborted}` +
        (lease.lost.aborted ? ` (${lease.lost.reason?.reason})` : ""),
    );
    await lease.releaseWithOutcome();
  }
  console.log("onLockLost:", lost.length === 0 ? "none" : lost.join(", "));
  console.log("leaseStats:", locker.leaseStats);
} finally {
  await locker.close();
  client.disconnect();
  await proxy.close();
  await server.stop();
  killAllChildren();
}
