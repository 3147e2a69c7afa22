import type { EtcdClient } from "../etcd/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, within } from "./finding.js";

/** The part of an `Etcd3` client the check uses: its cluster API's member list. */
interface MemberLister {
  readonly cluster?: { memberList(request?: object): Promise<{ members?: readonly unknown[] }> };
}

/**
 * The findings of an etcd locker's cluster: a single member (its loss loses every lock and stops
 * every locker; a 3- or 5-member cluster survives a member's failure).
 */
export async function checkEtcd(client: EtcdClient): Promise<Finding[]> {
  const cluster = (client as unknown as MemberLister).cluster;
  if (cluster === undefined || typeof cluster.memberList !== "function") {
    return [
      finding(
        "info",
        "etcd-unchecked",
        "This etcd client has no member list to read: the cluster's size was not checked",
      ),
    ];
  }
  try {
    const { members } = await within(CHECK_TIMEOUT_MS, "etcd", () => cluster.memberList({ linearizable: false }));
    const count = members?.length ?? 0;
    if (count === 1) {
      return [
        finding(
          "warning",
          "etcd-single-member",
          "The etcd cluster has one member: when it stops, every locker stops with it, and a lost data directory frees every lock and starts fencing tokens again",
          "Run 3 or 5 members (a majority survives the loss of a minority)",
        ),
      ];
    }
    if (count % 2 === 0 && count > 0) {
      return [
        finding(
          "info",
          "etcd-even-members",
          `The etcd cluster has ${count} members: it survives no more failures than ${count - 1} would`,
          `Run ${count - 1} or ${count + 1} members`,
        ),
      ];
    }
    return [];
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return [finding("error", "etcd-unreachable", `etcd could not be checked: ${detail}`)];
  }
}
