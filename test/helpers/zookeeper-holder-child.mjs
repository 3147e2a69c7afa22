/**
 * A ZooKeeperLocker holder in a child process, for the SIGKILL and SIGSTOP tests. It imports the
 * locker from `module` (a bundle of the sources the test made; default: the built package).
 * Argument: JSON { connectionString, sessionTimeout, key, expiry, owner, module? }. Sends
 * { token } once it holds `key` with a fencing token (as a string), and { lost, reason } when its
 * lease is reported lost. It holds until it is killed or its parent goes.
 */
import zookeeper from "node-zookeeper-client";

const { connectionString, sessionTimeout, key, expiry, owner, module } = JSON.parse(process.argv[2] ?? "{}");
const { ZooKeeperLocker } = await import(module ?? "globallock");
const client = zookeeper.createClient(connectionString, { sessionTimeout, spinDelay: 100 });
client.connect();
const locker = new ZooKeeperLocker(client, { expiry, owner });
const lease = await locker.acquire(undefined, key, { fencing: true });
lease.lost.addEventListener("abort", () => {
  process.send?.({ lost: true, reason: lease.lost.reason?.reason });
});
process.send?.({ token: String(lease.fencingToken) });
process.on("disconnect", () => process.exit(0));
