import type { ZooKeeperClient, ZooKeeperStat } from "../zookeeper/types.js";
import { codeOf, ErrorCode } from "../zookeeper/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, within } from "./finding.js";

/** Where ZooKeeper (3.5 and later) publishes the ensemble's configuration: one `server.<id>=…` line per member. */
const CONFIG_NODE = "/zookeeper/config";

/**
 * The findings of a ZooKeeper locker's ensemble: a single voting member (a standalone server, or
 * an ensemble of one) — its loss stops every locker, and a lost data directory frees every lock
 * and starts fencing tokens again. Reads the ensemble's configuration node (what `getConfig`
 * answers): observers do not vote, so they do not count.
 */
export async function checkZooKeeper(client: ZooKeeperClient): Promise<Finding[]> {
  let config: string | undefined;
  try {
    config = await within(CHECK_TIMEOUT_MS, "ZooKeeper", () => readConfig(client));
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return [finding("error", "zookeeper-unreachable", `ZooKeeper could not be checked: ${detail}`)];
  }
  if (config === undefined) {
    return [
      finding(
        "info",
        "zookeeper-unchecked",
        `ZooKeeper has no ${CONFIG_NODE} to read (a server before 3.5, or a client with a chroot): the ensemble's size was not checked`,
      ),
    ];
  }
  const voters = config.split("\n").filter((line) => /^server\.\d+=/.test(line) && !/:observer(;|$)/.test(line));
  if (voters.length > 1) return [];
  return [
    finding(
      "warning",
      "zookeeper-single-member",
      "The ZooKeeper ensemble has one member: when it stops, every locker stops with it, and a lost data directory frees every lock and starts fencing tokens again",
      "Run 3 or 5 members (a majority survives the loss of a minority)",
    ),
  ];
}

/** The configuration node's text ("" for a standalone server), or undefined when there is none. */
function readConfig(client: ZooKeeperClient): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    client.getData(CONFIG_NODE, (error, data: Buffer | undefined, _stat: ZooKeeperStat) => {
      if (error === null || error === undefined) resolve(data?.toString("utf8") ?? "");
      else if (codeOf(error) === ErrorCode.NO_NODE) resolve(undefined);
      else reject(error);
    });
  });
}
