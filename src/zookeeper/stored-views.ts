import type { ListedResource, StoredHolder, StoredView } from "../backend.js";
import { czxidOf, unavailable, type ZooKeeperCalls } from "./calls.js";
import { holdersOf, keyOfNodeName, nodeNameOf, queueOf } from "./layout.js";

/*
 * The read-only views of a ZooKeeper locker's keys (`inspect`, `list`): reads that change nothing
 * and leave no watch.
 */

/** Keys a listing inspects at once. */
const LIST_CONCURRENCY = 16;

/**
 * Who holds the key whose node is `keyNode` (one `getChildren`, then one `getData` per holder, sent
 * together: its owner and czxid) and how many wait. A holder lives as long as its session: its time
 * left is unbounded as ZooKeeper sees it.
 */
export async function inspectKey(calls: ZooKeeperCalls, keyNode: string, limit: number): Promise<StoredView> {
  try {
    const queue = queueOf(await calls.children(keyNode), limit);
    const holders = holdersOf(queue, limit);
    const read = await Promise.all(holders.map((entry) => calls.data(`${keyNode}/${entry.name}`)));
    const found: StoredHolder[] = [];
    holders.forEach((entry, index) => {
      const [data, stat] = read[index] ?? [];
      // Released between the two reads: no longer a holder.
      if (data === undefined || stat === undefined) return;
      const owner = data.toString("utf8");
      found.push({ owner, weight: entry.weight, expiresInMs: Number.POSITIVE_INFINITY, fencingToken: czxidOf(stat) });
    });
    return { holders: found, waiting: queue.length - holders.length };
  } catch (error) {
    throw unavailable(keyNode, error);
  }
}

/**
 * Up to `limit` held keys that start with `keyPrefix`: the children of the prefix node `prefix`
 * (every key's node, its name the key), in key order, inspected 16 at a time until `limit` are held.
 */
export async function listKeys(
  calls: ZooKeeperCalls,
  prefix: string,
  keyPrefix: string,
  limit: number,
  permits: number,
): Promise<ListedResource[]> {
  const names = await calls.children(prefix).catch((error: unknown) => {
    throw unavailable(prefix, error);
  });
  const keys: string[] = [];
  for (const name of names) {
    const key = keyOfNodeName(name);
    if (key?.startsWith(keyPrefix)) keys.push(key);
  }
  keys.sort();
  const listed: ListedResource[] = [];
  for (let start = 0; start < keys.length && listed.length < limit; start += LIST_CONCURRENCY) {
    const chunk = keys.slice(start, start + LIST_CONCURRENCY);
    const views = await Promise.all(chunk.map((key) => inspectKey(calls, `${prefix}/${nodeNameOf(key)}`, permits)));
    chunk.forEach((key, index) => {
      const view = views[index] as StoredView;
      if (view.holders.length > 0 && listed.length < limit) listed.push({ key, view });
    });
  }
  return listed;
}
