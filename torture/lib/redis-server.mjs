/**
 * Real redis-server processes for the torture suite: the shared launcher (support/redis-server.mjs)
 * with every process it spawns registered with the torture's cleanup backstop (./cleanup.mjs), so
 * that `killAllChildren()` kills the servers along with the workers. Each server runs on a free
 * 127.0.0.1 port chosen by the kernel (never 6379, never a fixed port), without persistence, in its
 * own temporary directory. Faults are real: SIGKILL, restart (empty, on the same port), SIGSTOP and
 * SIGCONT.
 */
import {
  RedisServer as SharedRedisServer,
  startSentinelGroup as sharedStartSentinelGroup,
  startServers as sharedStartServers,
} from "../../support/redis-server.mjs";
import { track } from "./cleanup.mjs";

export { assertRedisServerInstalled, freePort, RESILIENT_CLIENT } from "../../support/redis-server.mjs";

/** Start options with the torture's cleanup registration added. */
const tracked = (options = {}) => ({
  dirPrefix: "globallock-torture-",
  onSpawn: track,
  ...(Array.isArray(options) ? { args: options } : options),
});

/**
 * Starts a tracked server on a free port and resolves once it answers PING.
 * @returns {Promise<import("../../support/redis-server.mjs").RedisServer>}
 */
export function startServer(options) {
  return SharedRedisServer.start(tracked(options));
}

/** Starts `count` independent tracked servers (stopping the others if one fails). */
export function startServers(count, options) {
  return sharedStartServers(count, tracked(options));
}

/**
 * Starts a tracked Sentinel group (master, replicas, Sentinels; see support/redis-server.mjs):
 * every process of it is registered with the cleanup backstop.
 * @param {import("../../support/redis-server.mjs").SentinelGroupOptions} [options]
 * @returns {Promise<import("../../support/redis-server.mjs").SentinelGroup>}
 */
export function startSentinelGroup(options = {}) {
  return sharedStartSentinelGroup({ ...options, serverOptions: tracked(options.serverOptions) });
}
