import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { MemcachedClient } from "../memcached/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, within } from "./finding.js";

/** A `stats` command of the client, as a promise: one object per server. */
function statsOf(
  client: MemcachedClient,
  command: "stats" | "settings",
): Promise<ReadonlyArray<Record<string, unknown>>> {
  return new Promise((resolve, reject) =>
    client[command]((error, answers) => {
      if (error !== undefined && error !== null) reject(error instanceof Error ? error : new Error(String(error)));
      else resolve(answers ?? []);
    }),
  );
}

/** Whether `name` is an executable's name on PATH. */
function onPath(name: string): boolean {
  return (process.env.PATH ?? "").split(delimiter).some((dir) => dir !== "" && existsSync(join(dir, name)));
}

/** The findings of one server's `stats` and `stats settings`; `at` names it among several. */
function checkServer(stats: Record<string, unknown>, settings: Record<string, unknown>, at: string): Finding[] {
  const found: Finding[] = [];
  const evicted = Number(stats.evictions ?? 0);
  const evicts = settings.evictions !== "off";
  if (evicts || evicted > 0) {
    const how = evicts ? "evicts items under memory pressure (started without -M)" : "runs with -M";
    const count = evicted > 0 ? `, and has evicted ${evicted} since it started` : "";
    found.push(
      finding(
        "error",
        "memcached-evictions",
        `Memcached${at} ${how}${count}: a held lock's item can be evicted like any other, and another caller then takes the key while its holder works on (told at its next extension)`,
        "Start Memcached with -M (it then refuses to store rather than evict) and memory to spare, or give the locks a Memcached of their own",
      ),
    );
  } else {
    found.push(
      finding(
        "warning",
        "memcached-evictions",
        `Memcached${at} runs with -M and has evicted nothing, but it stays a cache: a restart or flush_all drops every held lock (the lockers then grant nothing for a lease), a full cache refuses new locks, and there are no fencing tokens`,
        "Use Memcached locks where a rare second holder costs duplicate work, not corrupt data; elsewhere a store with fencing tokens (Redis, etcd, PostgreSQL)",
      ),
    );
  }
  if (settings.cas_enabled === "no") {
    found.push(
      finding(
        "error",
        "memcached-cas-disabled",
        `Memcached${at} runs without CAS (-C): a lock can be taken but neither extended nor released (each runs out with its TTL)`,
        "Start Memcached without -C",
      ),
    );
  }
  return found;
}

/**
 * The findings of a Memcached locker's client and servers: evictions (always at least a warning:
 * a cache drops items), CAS turned off, several servers, and a client that would end the process
 * when it reconnects without `ping`.
 */
export async function checkMemcached(client: MemcachedClient): Promise<Finding[]> {
  const found: Finding[] = [];
  const servers = client.servers ?? [];
  const settings = client as unknown as { readonly remove?: unknown; readonly failOverServers?: unknown };
  if (servers.length > 1) {
    found.push(
      finding(
        "warning",
        "memcached-several-servers",
        `The client hashes keys over ${servers.length} Memcached servers: each lock lives on one (nothing is replicated), and should the client move a failed server's keys to another (remove: true, failOverServers), a second holder gets in there`,
        "Give the locks one Memcached server",
      ),
    );
  }
  if (settings.remove !== true && !onPath("ping")) {
    found.push(
      finding(
        "error",
        "memcached-client-ping",
        "The memcached client gets back to a server it counted dead by running `ping`, which is not on PATH here: the first time it does (after a server restart, say), the child process's error ends this process",
        "Make the client with MEMCACHED_CLIENT_OPTIONS (remove: true, for one server), or install ping (Debian: iputils-ping)",
      ),
    );
  }
  try {
    const [stats, serverSettings] = await within(CHECK_TIMEOUT_MS, "Memcached", () =>
      Promise.all([statsOf(client, "stats"), statsOf(client, "settings")]),
    );
    // Each command's answers come in the order the servers answered: match them by server.
    const settingsOf = new Map(serverSettings.map((answer) => [answer.server, answer]));
    for (const serverStats of stats) {
      const at = stats.length > 1 ? ` (${String(serverStats.server)})` : "";
      found.push(...checkServer(serverStats, settingsOf.get(serverStats.server) ?? {}, at));
    }
    if (stats.length === 0) throw new Error("no server answered");
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    found.push(finding("error", "memcached-unreachable", `Memcached could not be checked: ${detail}`));
  }
  return found;
}
