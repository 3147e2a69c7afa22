import { clientKind } from "../redis/client/connection-of.js";
import { isScriptRefusal } from "../redis/scripting.js";
import type { RedisClient } from "../redis/types.js";
import { CHECK_TIMEOUT_MS, type Finding, finding, unchecked, within } from "./finding.js";

/** Sends one command to `client` as it is, whichever library made it; resolves to the raw reply. */
function command(client: RedisClient, args: readonly string[]): Promise<unknown> {
  const raw = client as unknown as Record<string, (...values: unknown[]) => Promise<unknown>>;
  switch (clientKind(client)) {
    case "ioredis":
      return (raw.call as (...values: unknown[]) => Promise<unknown>).call(client, ...args);
    case "node-redis":
      return (raw.sendCommand as (...values: unknown[]) => Promise<unknown>).call(client, [...args]);
    case "node-redis-cluster":
      return (raw.sendCommand as (...values: unknown[]) => Promise<unknown>).call(client, undefined, true, [...args]);
    default:
      return Promise.reject(new Error("this client's commands cannot be sent here"));
  }
}

/** `CONFIG GET name`'s value (a flat array or, from node-redis with RESP3, an object). */
async function configValue(client: RedisClient, name: string): Promise<string> {
  const reply = await command(client, ["CONFIG", "GET", name]);
  if (Array.isArray(reply)) return String(reply[1] ?? "");
  if (reply !== null && typeof reply === "object") return String((reply as Record<string, unknown>)[name] ?? "");
  return "";
}

/** One `INFO section` field. */
async function infoField(client: RedisClient, section: string, field: string): Promise<string | undefined> {
  const text = String(await command(client, ["INFO", section]));
  return new RegExp(`^${field}:(.*)$`, "m").exec(text)?.[1]?.trim();
}

/** True for a reply that refuses a command (here `CONFIG`): an ACL refusal, or a command renamed away. */
function isRefusal(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /^NOPERM|unknown command/i.test(message);
}

/** The findings of one Redis node (or Cluster) the locker uses; `where` names it in a quorum. */
async function checkNode(client: RedisClient, where: string): Promise<Finding[]> {
  const found: Finding[] = [];
  const at = where === "" ? "" : ` (${where})`;
  // Scripting: every lock operation but the first try runs a Lua script.
  try {
    await command(client, ["EVAL", "return 1", "0"]);
  } catch (error) {
    if (!isScriptRefusal(error, true)) throw error;
    found.push(
      finding(
        "error",
        "redis-scripting-refused",
        `Redis refuses Lua scripts${at}: ${(error as Error).message}. Every lock would live exactly one lease, and its release would not free it`,
        "Allow scripting for the locker's user (ACL SETUSER <user> +@scripting) and do not rename EVAL or EVALSHA away",
      ),
    );
  }
  try {
    const policy = await configValue(client, "maxmemory-policy");
    if (policy.startsWith("allkeys-")) {
      found.push(
        finding(
          "error",
          "redis-eviction-policy",
          `maxmemory-policy is ${policy}${at}: under memory pressure Redis evicts any key, a held lock's too, and another caller then takes it`,
          "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or give the locks a Redis of their own",
        ),
      );
    } else if (policy.startsWith("volatile-")) {
      found.push(
        finding(
          "warning",
          "redis-eviction-policy",
          `maxmemory-policy is ${policy}${at}: lock keys have a TTL, so under memory pressure Redis may evict a held lock`,
          "CONFIG SET maxmemory-policy noeviction, or keep memory well below maxmemory",
        ),
      );
    }
    const [appendonly, save] = await Promise.all([configValue(client, "appendonly"), configValue(client, "save")]);
    if (appendonly !== "yes" && save.trim() === "") {
      found.push(
        finding(
          "warning",
          "redis-no-persistence",
          `Redis keeps nothing on disk${at} (appendonly no, no save points): a restart frees every held lock while its holder works on, and fencing counters start again from 1`,
          "appendonly yes (appendfsync everysec or always); or rely on fencing tokens checked where you write",
        ),
      );
    }
  } catch (error) {
    if (!isRefusal(error)) throw error;
    found.push(unchecked("redis-config-unreadable", `the eviction policy and persistence${at}`, error));
  }
  const role = await infoField(client, "replication", "role");
  if (role === "slave" || role === "replica") {
    found.push(
      finding(
        "error",
        "redis-replica",
        `The locker talks to a replica${at}: it cannot take locks there (writes are refused), and a replica's keys are not the master's`,
        "Point the locker at the master (or at Sentinel, which finds it)",
      ),
    );
  } else if (Number(await infoField(client, "replication", "connected_slaves")) > 0) {
    found.push(
      finding(
        "warning",
        "redis-replication",
        `Redis replicates to replicas${at}, asynchronously: after a failover the new master may lack a lock taken just before, and a second holder can get in (the first is told at its next extension)`,
        "Check fencing tokens where you write, or use a Redlock quorum of independent nodes or etcd",
      ),
    );
  }
  const time = await command(client, ["TIME"]);
  if (Array.isArray(time)) {
    const serverMs = Number(time[0]) * 1000 + Number(time[1]) / 1000;
    const offset = serverMs - Date.now();
    if (Math.abs(offset) > 2000) {
      found.push(
        finding(
          "warning",
          "redis-clock-offset",
          `This host's clock is ${Math.round(Math.abs(offset) / 1000)} s ${offset > 0 ? "behind" : "ahead of"} Redis's${at}: leases run on Redis's clock and are bounded here on this one, so both must keep time (a clock that is this far off may also run fast or slow)`,
          "Run NTP (chrony, systemd-timesyncd) on both hosts",
        ),
      );
    }
  }
  return found;
}

/** The findings of a Redis locker over `clients` (one node or Cluster, or a quorum's nodes). */
export async function checkRedis(clients: readonly RedisClient[]): Promise<Finding[]> {
  const perNode = await Promise.all(
    clients.map(async (client, index) => {
      const where = clients.length === 1 ? "" : `node ${index + 1} of ${clients.length}`;
      try {
        return await within(CHECK_TIMEOUT_MS, `Redis${where === "" ? "" : ` ${where}`}`, () =>
          checkNode(client, where),
        );
      } catch (error) {
        const detail = error instanceof Error ? error.message : String(error);
        return [
          finding(
            "error",
            "redis-unreachable",
            `Redis${where === "" ? "" : ` ${where}`} could not be checked: ${detail}`,
          ),
        ];
      }
    }),
  );
  return perNode.flat();
}
