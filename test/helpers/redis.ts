/**
 * Real redis-server processes for tests: a typed re-export of the shared launcher,
 * support/redis-server.mjs (also used by bench/ and torture/), so that test imports keep working.
 * Each server runs on a free 127.0.0.1 port, without persistence, in its own temporary directory,
 * and is always stopped (by the test, and on process exit as a backstop). Faults are real: kill,
 * restart, SIGSTOP/SIGCONT.
 */
export {
  assertRedisServerInstalled,
  freePort,
  HOST,
  RESILIENT_CLIENT,
  RedisServer,
  type RedisServerOptions,
  type SentinelGroup,
  type SentinelGroupOptions,
  startCluster,
  startSentinelGroup,
  startServers,
  stopServers,
} from "../../support/redis-server.mjs";
