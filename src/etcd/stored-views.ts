import { performance } from "node:perf_hooks";
import type { ListedResource, StoredHolder, StoredView } from "../backend.js";
import { mapBounded } from "../internal/list-options.js";
import type { EtcdCommands } from "./etcd-commands.js";
import { directoryOf, type Entry, keyOfEntry, parseEntry } from "./layout.js";
import type { Leases } from "./leases.js";
import { prefixEnd, rangeOf, ZERO } from "./ranges.js";
import type { EtcdClient, EtcdKeyValue } from "./types.js";

/*
 * The read-only views of an etcd locker's keys (`inspect`, `list`): reads over the client that
 * change nothing.
 */

/** etcd keys a listing's range read answers at most. */
const LIST_PAGE = 128;

/** Keys a listing inspects at once. */
const LIST_CONCURRENCY = 16;

/** What the views read with. */
export interface ViewSource {
  readonly client: EtcdClient;
  readonly commands: EtcdCommands;
  /** The locker's own leases: their time left is known here, without asking etcd. */
  readonly leases: Leases;
  /** The locker's key prefix. */
  readonly prefix: string;
  /** Permits per key (1 for a lock). */
  readonly limit: number;
}

/**
 * Who holds `resource` and who waits (one range read, plus one `LeaseTimeToLive` per other
 * locker's lease among the holders).
 */
export async function inspectKey(source: ViewSource, resource: string): Promise<StoredView> {
  const { client, commands, leases, prefix, limit } = source;
  const directory = directoryOf(client.prefix, prefix, resource.slice(prefix.length));
  const { kvs } = await commands.range(resource, rangeOf(directory));
  const now = performance.now();
  const holders: Array<{ kv: EtcdKeyValue; entry: Entry }> = [];
  let used = 0;
  for (const kv of kvs) {
    const entry = parseEntry(kv.value, limit);
    if (used + entry.weight > limit) break;
    used += entry.weight;
    holders.push({ kv, entry });
  }
  const ttls = new Map<string, Promise<number>>();
  for (const { kv } of holders) {
    if (ttls.has(kv.lease)) continue;
    const own = leases.find(kv.lease);
    ttls.set(
      kv.lease,
      own !== undefined
        ? Promise.resolve(Math.max(0, own.validUntil - now))
        : commands
            .call(resource, (options) => client.leaseClient.leaseTimeToLive({ ID: kv.lease }, options))
            .then((answer) => Math.max(0, Number(answer.TTL) * 1000)),
    );
  }
  const result: StoredHolder[] = [];
  for (const { kv, entry } of holders) {
    result.push({
      owner: entry.owner,
      weight: entry.weight,
      expiresInMs: await (ttls.get(kv.lease) as Promise<number>),
      fencingToken: BigInt(kv.create_revision),
    });
  }
  return { holders: result, waiting: kvs.length - holders.length };
}

/**
 * Held keys under the locker's prefix: range reads of the prefix, keys only, at most
 * {@link LIST_PAGE} etcd keys each, each page starting past the directory of the last key seen
 * (its other entries are skipped), until `limit` keys that start with `filter` are named; then
 * each is inspected (at most {@link LIST_CONCURRENCY} at once) and those held are kept.
 */
export async function listHeld(source: ViewSource, filter: string, limit: number): Promise<ListedResource[]> {
  const { client, commands, prefix } = source;
  const base = Buffer.concat([client.prefix, Buffer.from(prefix, "utf8")]);
  const rangeEnd = prefixEnd(base);
  const keys: string[] = [];
  let start: Buffer = base;
  while (keys.length < limit) {
    const { kvs } = await commands.range(prefix, {
      key: start,
      range_end: rangeEnd,
      limit: LIST_PAGE,
      keys_only: true,
    });
    let next: Buffer | undefined;
    for (const { key: name } of kvs) {
      if (next !== undefined && Buffer.compare(name, next) < 0) continue;
      const key = keyOfEntry(name.subarray(base.length));
      if (key === undefined) {
        next = Buffer.concat([name, ZERO]);
        continue;
      }
      next = directoryOf(client.prefix, prefix, key).end;
      if (key.startsWith(filter)) keys.push(key);
      if (keys.length >= limit) break;
    }
    if (kvs.length < LIST_PAGE || next === undefined) break;
    start = next;
  }
  const views = await mapBounded(keys, LIST_CONCURRENCY, (key) => inspectKey(source, prefix + key));
  const listed: ListedResource[] = [];
  keys.forEach((key, index) => {
    const view = views[index] as StoredView;
    if (view.holders.length > 0) listed.push({ key, view });
  });
  return listed;
}
