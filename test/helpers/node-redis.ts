/**
 * node-redis (the `redis` package) clients for tests, v6 (`redis`) and v5 (`redis5`, an npm alias),
 * and contract harnesses for every Redis locker on them. Every locker gets its own connected client,
 * like a separate process sharing the Redis; a harness's cleanup closes its lockers, then their
 * clients. Deployments (one node, a Cluster, a quorum) are started once per file and shared.
 */
import { createClient, createCluster } from "redis";
import { createClient as createClient5, createCluster as createCluster5 } from "redis5";
import {
  type Locker,
  RedisLocker,
  type RedisLockerOptions,
  RedisReadWriteLocker,
  RedisSemaphore,
} from "../../src/index.js";
import type { NodeRedisClient } from "../../src/redis/types.js";
import type { LockerHarness } from "../contracts/contract.js";
import type { ReadWriteHarness } from "../contracts/read-write-contract.js";
import type { SemaphoreHarness } from "../contracts/semaphore-contract.js";
import type { RedisServer } from "./redis.js";
import { SharedDeployment } from "./redis-primitives-harness.js";

/** A node-redis major version under test. */
export type NodeRedisVersion = 5 | 6;

/** A connected node-redis client or cluster, with what tests call on it. */
export type TestNodeRedis = NodeRedisClient & {
  destroy(): unknown;
  isReady?: boolean;
  sendCommand(...args: never[]): Promise<unknown>;
};

/** Reconnects every 50 ms (as RESILIENT_CLIENT does for ioredis), so restarts are quick to notice. */
const reconnectStrategy = (): number => 50;

/** A new, connected node-redis client (`createClient`) for `server`; errors are swallowed. */
export async function nodeRedisClient(
  server: RedisServer,
  version: NodeRedisVersion = 6,
  extra: { RESP?: 2 | 3; disableOfflineQueue?: boolean } = {},
): Promise<TestNodeRedis> {
  const options = { url: server.url, socket: { reconnectStrategy }, ...extra };
  const client = version === 6 ? createClient(options) : createClient5(options);
  client.on("error", () => undefined);
  await client.connect();
  return client as unknown as TestNodeRedis;
}

/** A new, connected node-redis cluster (`createCluster`) over `servers`; errors are swallowed. */
export async function nodeRedisCluster(servers: RedisServer[], version: NodeRedisVersion = 6): Promise<TestNodeRedis> {
  const options = {
    rootNodes: servers.map((server) => ({ url: server.url })),
    defaults: { socket: { reconnectStrategy } },
  };
  const cluster = version === 6 ? createCluster(options) : createCluster5(options);
  cluster.on("error", () => undefined);
  await cluster.connect();
  return cluster as unknown as TestNodeRedis;
}

/** Closes a client at once; already closed is fine. */
export function destroyQuietly(client: { destroy(): unknown }): void {
  try {
    Promise.resolve(client.destroy()).catch(() => undefined);
  } catch {
    // already closed
  }
}

/** A deployment the harnesses of a file share: started once, stopped after the last harness left. */
export type NodeRedisDeployment = SharedDeployment<Promise<TestNodeRedis[]>>;

/**
 * A {@link NodeRedisDeployment}: `start` starts the servers and says how one locker connects. The
 * next locker's clients are connected ahead of time, so a test does not wait for the handshake;
 * the spare ones are closed when the deployment stops.
 */
export function nodeRedisDeployment(
  start: () => Promise<{ connect(): Promise<TestNodeRedis[]>; stop(): Promise<void> }>,
): NodeRedisDeployment {
  return new SharedDeployment(async () => {
    const started = await start();
    let spare = started.connect();
    spare.catch(() => undefined);
    return {
      connect() {
        const next = spare;
        spare = started.connect();
        spare.catch(() => undefined);
        return next;
      },
      async stop() {
        for (const client of await spare.catch(() => [])) destroyQuietly(client);
        await started.stop();
      },
    };
  });
}

const WAKE_ONLY: RedisLockerOptions = { backoff: { min: 20_000, max: 20_000 } };

/** The options a harness's `create({ wakeOnly })` asks for. */
const optionsFor = (options?: { wakeOnly?: boolean | undefined }): RedisLockerOptions =>
  options?.wakeOnly ? WAKE_ONLY : {};

/**
 * Makes lockers on new clients of `deployment` and tracks them (and the clients) for cleanup:
 * `make(clients, options)` builds one locker on the clients of one "process".
 */
async function maker<T extends { close(): Promise<void> }, O>(
  deployment: NodeRedisDeployment,
  make: (clients: TestNodeRedis | TestNodeRedis[], options: O) => T,
): Promise<{ create(options: O): Promise<T>; cleanup(): Promise<void> }> {
  const connect = await deployment.join();
  const made: T[] = [];
  const clients: TestNodeRedis[] = [];
  return {
    async create(options) {
      const connected = await connect();
      clients.push(...connected);
      const locker = make(connected.length === 1 ? (connected[0] as TestNodeRedis) : connected, options);
      made.push(locker);
      return locker;
    },
    async cleanup() {
      await Promise.allSettled(made.map((locker) => locker.close()));
      for (const client of clients) destroyQuietly(client);
      await deployment.leave();
    },
  };
}

/**
 * The lock contract's harness for `RedisLocker` on node-redis clients (`fencing`: false for a
 * quorum deployment).
 */
export async function nodeRedisLockerHarness(deployment: NodeRedisDeployment, fencing = true): Promise<LockerHarness> {
  const lockers = await maker(deployment, (clients, options: RedisLockerOptions) => new RedisLocker(clients, options));
  const create = (wanted?: { wakeOnly?: boolean }): Promise<Locker> => lockers.create(optionsFor(wanted));
  return {
    create,
    peer: (_locker, wanted) => create(wanted),
    fencing,
    handOff: true,
    cleanup: () => lockers.cleanup(),
  };
}

/** The semaphore contract's harness for `RedisSemaphore` on node-redis clients. */
export async function nodeRedisSemaphoreHarness(deployment: NodeRedisDeployment): Promise<SemaphoreHarness> {
  const semaphores = await maker(
    deployment,
    (clients, options: RedisLockerOptions & { limit: number }) => new RedisSemaphore(clients, options),
  );
  const create = (wanted: { limit: number; wakeOnly?: boolean }): Promise<Locker> =>
    semaphores.create({ limit: wanted.limit, ...optionsFor(wanted) });
  return {
    create,
    peer: (locker, wanted) => create({ limit: (locker as RedisSemaphore).limit, ...wanted }),
    expires: true,
    cleanup: () => semaphores.cleanup(),
  };
}

/** The read-write contract's harness for `RedisReadWriteLocker` on node-redis clients. */
export async function nodeRedisReadWriteHarness(deployment: NodeRedisDeployment): Promise<ReadWriteHarness> {
  const lockers = await maker(
    deployment,
    (clients, options: RedisLockerOptions) => new RedisReadWriteLocker(clients, options),
  );
  const create = (wanted?: { wakeOnly?: boolean }): Promise<RedisReadWriteLocker> => lockers.create(optionsFor(wanted));
  return { create, peer: (_rw, wanted) => create(wanted), fencing: true, cleanup: () => lockers.cleanup() };
}

/**
 * Drops every subscriber connection of a server (`admin` is a connection to it) while the server
 * refuses new connections (`maxclients 1`), runs `meanwhile` (say, a release whose message is then
 * lost), and lets connections in again: a subscriber is back only after `meanwhile` settled.
 */
export async function dropSubscribersDuring(
  admins: ReadonlyArray<{ call(...args: string[]): Promise<unknown> }>,
  meanwhile: () => Promise<unknown>,
): Promise<void> {
  const limits = await Promise.all(admins.map((admin) => admin.call("CONFIG", "GET", "maxclients")));
  await Promise.all(admins.map((admin) => admin.call("CONFIG", "SET", "maxclients", "1")));
  try {
    await Promise.all(admins.map((admin) => admin.call("CLIENT", "KILL", "TYPE", "pubsub")));
    await meanwhile();
    await new Promise((resolve) => setTimeout(resolve, 200)); // reconnections are refused meanwhile
  } finally {
    await Promise.all(
      admins.map((admin, index) => admin.call("CONFIG", "SET", "maxclients", String((limits[index] as string[])[1]))),
    );
  }
}
