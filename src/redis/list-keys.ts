import type { ListedResource, StoredView } from "../backend.js";
import { mapBounded } from "../internal/list-options.js";
import type { ScanStep } from "./client/redis-connection.js";
import { companionKey } from "./keys.js";
import { unavailable } from "./store-errors.js";

/** The `COUNT` of each SCAN step: a hint of how many names one step looks at. */
const SCAN_COUNT = 200;

/** Held keys a listing inspects at once. */
const INSPECT_CONCURRENCY = 16;

/** The names a lock key's companions end in (see keys.ts, fencing.ts, the stores). */
const COMPANIONS = ["queue", "waiters", "fence"];

/** What a Redis listing needs of its store. */
export interface RedisListing {
  /** A SCAN step for each node to read (one node, a Cluster's masters, a quorum's nodes). */
  readonly nodes: () => Promise<ScanStep[]>;
  /** The locker's key prefix. */
  readonly prefix: string;
  /** True on a Cluster (companion keys are named by their slot). */
  readonly cluster: boolean;
  /** The store's inspect of one lock key. */
  readonly inspect: (resource: string) => Promise<StoredView>;
  /** How long one SCAN step may take, in ms (the locker's operation timeout). */
  readonly timeoutMs: number;
  /**
   * How many nodes may fail to answer (a quorum's minority: the keys it holds are on the others);
   * default 0.
   */
  readonly tolerated?: number;
}

/**
 * Up to `limit` held keys whose caller's key starts with `filter`: SCAN steps with a `MATCH` of
 * the locker's prefix and `filter` and a `COUNT` of {@link SCAN_COUNT} (never `KEYS`: the server
 * is not blocked), node after node, leaving out the companions of lock keys (queues, waiters'
 * marks, fencing counters); each batch of names is inspected (a few at a time), and the scan stops
 * once `limit` held keys are found. A name of another type (a semaphore's set under a lock's
 * prefix: WRONGTYPE) is left out. A key with a {hash tag} that itself ends in `:queue`,
 * `:waiters` or `:fence` reads as a companion and is left out.
 */
export async function listHeld(listing: RedisListing, filter: string, limit: number): Promise<ListedResource[]> {
  const { prefix, cluster } = listing;
  const match = `${escapeGlob(prefix + filter)}*`;
  const listed: ListedResource[] = [];
  const seen = new Set<string>();
  let steps: ScanStep[];
  try {
    steps = await listing.nodes();
  } catch (error) {
    throw unavailable(prefix, "list", [error], "single");
  }
  const failures: unknown[] = [];
  nodes: for (const step of steps) {
    let cursor = "0";
    do {
      let reply: unknown;
      try {
        reply = await bounded(step(cursor, match, SCAN_COUNT), listing.timeoutMs);
      } catch (error) {
        failures.push(error);
        if (failures.length > (listing.tolerated ?? 0)) throw unavailable(prefix, "list", failures, "single");
        continue nodes;
      }
      const [next, names] = Array.isArray(reply) ? (reply as [unknown, unknown]) : [];
      if (!Array.isArray(names)) throw unavailable(prefix, "list", [new Error("unexpected SCAN reply")], "single");
      cursor = String(next);
      const batch: string[] = [];
      for (const name of names) {
        const resource = String(name);
        if (seen.has(resource) || !resource.startsWith(prefix) || isCompanion(resource, cluster)) continue;
        seen.add(resource);
        batch.push(resource);
      }
      const views = await mapBounded(batch, INSPECT_CONCURRENCY, (resource) =>
        listing.inspect(resource).catch((error: unknown) => {
          if (isWrongType(error)) return undefined;
          throw error;
        }),
      );
      batch.forEach((resource, index) => {
        const view = views[index];
        if (view !== undefined && view.holders.length > 0 && listed.length < limit) {
          listed.push({ key: resource.slice(prefix.length), view });
        }
      });
      if (listed.length >= limit) return listed;
    } while (cursor !== "0");
  }
  return listed;
}

/** `promise`, or a rejection once `ms` have passed without its answer. */
function bounded<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`SCAN not answered within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** True when `name` is a companion of a lock key (see keys.ts), not a lock key. */
function isCompanion(name: string, cluster: boolean): boolean {
  for (const suffix of COMPANIONS) {
    if (!name.endsWith(`:${suffix}`)) continue;
    const plain = name.slice(0, -(suffix.length + 1));
    if (companionKey(plain, suffix, cluster) === name) return true;
    if (plain.startsWith("{") && plain.endsWith("}") && companionKey(plain.slice(1, -1), suffix, cluster) === name) {
      return true;
    }
  }
  return false;
}

/** True for a WRONGTYPE reply (the name holds another kind of value), however it was wrapped. */
function isWrongType(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.message.includes("WRONGTYPE")) return true;
  if (error instanceof AggregateError && error.errors.some(isWrongType)) return true;
  return isWrongType(error.cause);
}

/** `text` as a SCAN `MATCH` pattern that matches it literally. */
function escapeGlob(text: string): string {
  return text.replace(/[\\*?[\]]/g, "\\$&");
}
