/**
 * redis-server processes owned by the benchmark: the shared launcher (support/redis-server.mjs),
 * each server on a free loopback port chosen by the kernel (never a fixed port, so a Redis already
 * running on 6379 is never touched), bound to 127.0.0.1 only, without persistence, in its own
 * temporary directory, pinned to the Redis CPU when pinning is in effect (./cpu.mjs), registered
 * with the benchmark's cleanup (./cleanup.mjs: killed on exit, error and Ctrl-C), and stopped with
 * SIGTERM (SIGKILL after 2 s).
 */
import { RedisServer as SharedRedisServer } from "../../support/redis-server.mjs";
import { onCleanup } from "./cleanup.mjs";
import { onRedisCpu } from "./cpu.mjs";

export { freePort, redisServerVersion } from "../../support/redis-server.mjs";

/** The benchmark's start options: CPU pinning, cleanup registration, graceful stop. */
const BENCH_OPTIONS = Object.freeze({
  dirPrefix: "globallock-bench-redis-",
  wrapCommand: onRedisCpu,
  onSpawn: (child) =>
    onCleanup(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }),
  stopSignal: "SIGTERM",
});

/**
 * Starts a server with the benchmark's options on a free port and resolves once it answers PING.
 * @returns {Promise<import("../../support/redis-server.mjs").RedisServer>}
 */
export function startServer(options = {}) {
  return SharedRedisServer.start({ ...BENCH_OPTIONS, ...options });
}
