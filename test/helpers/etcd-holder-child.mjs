/**
 * An EtcdLocker holder in a child process, for the SIGSTOP and hand-off tests. It imports the
 * BUILT package. Argument: JSON { endpoints, key, expiry, handOff? }. Sends { token } once it holds
 * `key` with a fencing token, and { lost, reason } when its lease is reported lost; with
 * `handOff`, hands the lease off instead, sends { token, handle } and exits without releasing.
 */
import { Etcd3 } from "etcd3";
import { EtcdLocker } from "globallock";

const { endpoints, key, expiry, handOff } = JSON.parse(process.argv[2] ?? "{}");
const client = new Etcd3({ hosts: endpoints });
const locker = new EtcdLocker(client, { expiry, owner: "etcd-child" });
const lease = await locker.acquire(undefined, key, { fencing: true });
if (handOff) {
  const handle = await lease.handOff();
  process.send?.({ token: String(lease.fencingToken), handle }, () => process.exit(0));
}
lease.lost.addEventListener("abort", () => {
  process.send?.({ lost: true, reason: lease.lost.reason?.reason });
});
if (!handOff) process.send?.({ token: String(lease.fencingToken) });
process.on("disconnect", () => process.exit(0));
