/**
 * An EtcdLocker holder in a child process, for the SIGSTOP fault test. It imports the BUILT
 * package. Argument: JSON { endpoints, key, expiry }. Sends { token } once it holds `key` with a
 * fencing token, and { lost, reason } when its lease is reported lost.
 */
import { Etcd3 } from "etcd3";
import { EtcdLocker } from "globallock";

const { endpoints, key, expiry } = JSON.parse(process.argv[2] ?? "{}");
const client = new Etcd3({ hosts: endpoints });
const locker = new EtcdLocker(client, { expiry });
const lease = await locker.acquire(undefined, key, { fencing: true });
lease.lost.addEventListener("abort", () => {
  process.send?.({ lost: true, reason: lease.lost.reason?.reason });
});
process.send?.({ token: String(lease.fencingToken) });
process.on("disconnect", () => process.exit(0));
