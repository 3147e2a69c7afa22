/**
 * A process that takes a lease on a real Redis, hands it off and dies without releasing it: the
 * "old holder" of test/redis/redis-adopt-processes.test.ts. It imports the BUILT package.
 *
 * argv[2]: JSON { client: "ioredis" | "node-redis", topology: "node" | "quorum" | "cluster",
 *   ports: number[], kind: "lock" | "semaphore" | "read" | "write", key, options, weight? }
 *   (options: the locker's options; a semaphore's include its limit).
 * stdout: one line "handle <the handle>". Exit status 0 once printed; the lease is never released
 * (the process exits with its connections), so only an adopter can release it.
 */
import { RedisLocker, RedisReadWriteLocker, RedisSemaphore } from "globallock";

const spec = JSON.parse(process.argv[2] ?? "{}");
const HOST = "127.0.0.1";

/** One client per node for a quorum, else one client (a node or a Cluster). */
async function connect() {
  const urls = spec.ports.map((port) => `redis://${HOST}:${port}`);
  // Only the library in use is loaded: a child's start-up is most of its time.
  if (spec.client === "ioredis") {
    const { Cluster, Redis } = await import("ioredis");
    const clients =
      spec.topology === "cluster"
        ? [new Cluster(spec.ports.map((port) => ({ host: HOST, port })))]
        : spec.ports.map((port) => new Redis({ host: HOST, port }));
    // Connected (a Cluster: its slots known) before the first command and its timeout.
    await Promise.all(clients.map((client) => new Promise((resolve) => client.once("ready", resolve))));
    return spec.topology === "quorum" ? clients : clients[0];
  }
  const { createClient, createCluster } = await import("redis");
  if (spec.topology === "cluster") {
    const cluster = createCluster({ rootNodes: urls.map((url) => ({ url })) });
    await cluster.connect();
    return cluster;
  }
  const clients = await Promise.all(urls.map((url) => createClient({ url }).connect()));
  return spec.topology === "quorum" ? clients : clients[0];
}

const clients = await connect();
const locker =
  spec.kind === "lock"
    ? new RedisLocker(clients, spec.options)
    : spec.kind === "semaphore"
      ? new RedisSemaphore(clients, spec.options)
      : new RedisReadWriteLocker(clients, spec.options)[spec.kind];
const lease = await locker.acquire(AbortSignal.timeout(10_000), spec.key, spec.weight ? { weight: spec.weight } : {});
const handle = await lease.handOff();
process.stdout.write(`handle ${handle}\n`, () => process.exit(0));
