/**
 * The Redis lock implementations under test, behind one tiny interface so that every scenario
 * drives them identically:
 *
 *   const session = await contender.open(port);   // own ioredis client(s), ready
 *   const release = await session.lock(key);       // waits; undefined = the library gave up
 *   await release();
 *   await session.close();                         // closes everything the session opened
 *
 * A session may be used by several concurrent callers (they then share its connection).
 */
import { randomBytes } from "node:crypto";
import { RedisLocker, RedisSemaphore } from "globallock";
import { Mutex, Semaphore, TimeoutError } from "redis-semaphore";
import Redlock, { ExecutionError } from "redlock";
import { rawDirectGrant, rawWakeClaim } from "./raw-direct-grant.mjs";
import { COMPARE_AND_DELETE, LEASE_MS } from "./raw-floor.mjs";
import { connectClient } from "./redis-client.mjs";

/**
 * @typedef {() => Promise<void>} Release
 * @typedef {{ lock(key: string): Promise<Release | undefined>, close(): Promise<void> }} Session
 * @typedef {{ id: string, label: string, open(port: number): Promise<Session> }} Contender
 */

/** Permits per key of the semaphore contenders (scenario 8). */
export const SEMAPHORE_LIMIT = 4;

const ignore = () => undefined;

/**
 * The raw floor: `SET key token NX PX 30000`, and a Lua compare-and-delete (EVALSHA) to release.
 * It does not wait: `lock` gives up (undefined) when the key is held.
 * @type {Contender}
 */
export const raw = {
  id: "raw",
  label: "raw SET NX PX + Lua DEL (floor)",
  async open(port) {
    const client = await connectClient(port);
    const sha = await client.script("LOAD", COMPARE_AND_DELETE);
    return {
      async lock(key) {
        const token = randomBytes(16).toString("hex");
        const reply = await client.set(key, token, "NX", "PX", LEASE_MS);
        if (reply !== "OK") return undefined;
        return () => client.evalsha(sha, 1, key, token).then(ignore);
      },
      async close() {
        client.disconnect();
      },
    };
  },
};

/**
 * A globallock Locker over its own client; `lock` takes the key (one permit of a semaphore).
 * @param {string} id
 * @param {string} label
 * @param {(client: import("ioredis").Redis) => import("globallock").Locker} create
 * @returns {Contender}
 */
function globallockContender(id, label, create) {
  return {
    id,
    label,
    async open(port) {
      const client = await connectClient(port);
      const locker = create(client);
      return {
        lock: (key) => locker.lock(undefined, key),
        async close() {
          await locker.close();
          client.disconnect();
        },
      };
    },
  };
}

/** globallock's RedisLocker with default options. */
export const globallock = globallockContender(
  "globallock",
  "globallock RedisLocker",
  (client) => new RedisLocker(client),
);

/**
 * redlock 5 used directly, `new Redlock([client], settings)`; an ExecutionError (no quorum within
 * its retries) counts as "gave up".
 * @param {string} id
 * @param {string} label
 * @param {import("redlock").Settings | undefined} settings
 * @returns {Contender}
 */
function redlockContender(id, label, settings) {
  return {
    id,
    label,
    async open(port) {
      const client = await connectClient(port);
      const redlock = settings === undefined ? new Redlock([client]) : new Redlock([client], settings);
      return {
        async lock(key) {
          let lock;
          try {
            lock = await redlock.acquire([key], LEASE_MS);
          } catch (error) {
            if (error instanceof ExecutionError) return undefined;
            throw error;
          }
          return () => lock.release().then(ignore, ignore);
        },
        async close() {
          client.disconnect();
        },
      };
    },
  };
}

/** redlock with `retryCount: 0`: one attempt, for the uncontended comparison. */
export const redlockNoRetry = redlockContender("redlock-0", "redlock 5 (retryCount 0)", { retryCount: 0 });

/** redlock's defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms; it can give up. */
export const redlockDefault = redlockContender(
  "redlock-default",
  "redlock 5 (default retry 200±100 ms ×10)",
  undefined,
);

/** redlock polling every 1 ms, without giving up. */
export const redlock1ms = redlockContender("redlock-1ms", "redlock 5 (retry every 1 ms, unlimited)", {
  retryDelay: 1,
  retryJitter: 0,
  retryCount: -1,
});

/**
 * A redis-semaphore primitive, one instance per acquisition (as its README does), polling every 1 ms
 * instead of its default 10 ms; it gives up (TimeoutError) after its default acquireTimeout (10 s).
 * @param {string} id
 * @param {string} label
 * @param {(client: import("ioredis").Redis, key: string, options: object) => { acquire(): Promise<void>, release(): Promise<void> }} create
 * @returns {Contender}
 */
function redisSemaphoreContender(id, label, create) {
  return {
    id,
    label,
    async open(port) {
      const client = await connectClient(port);
      return {
        async lock(key) {
          const primitive = create(client, key, { lockTimeout: LEASE_MS, retryInterval: 1, onLockLost: ignore });
          try {
            await primitive.acquire();
          } catch (error) {
            if (error instanceof TimeoutError) return undefined;
            throw error;
          }
          return () => primitive.release();
        },
        async close() {
          client.disconnect();
        },
      };
    },
  };
}

/** redis-semaphore's Mutex. */
export const redisSemaphore = redisSemaphoreContender(
  "redis-semaphore",
  "redis-semaphore Mutex (retryInterval 1 ms)",
  (client, key, options) => new Mutex(client, key, options),
);

/** redis-semaphore's Semaphore with {@link SEMAPHORE_LIMIT} permits; one permit per acquisition. */
export const redisSemaphoreSemaphore = redisSemaphoreContender(
  "redis-semaphore-semaphore",
  `redis-semaphore Semaphore (limit ${SEMAPHORE_LIMIT}, retryInterval 1 ms)`,
  (client, key, options) => new Semaphore(client, key, SEMAPHORE_LIMIT, options),
);

/** globallock's RedisSemaphore with {@link SEMAPHORE_LIMIT} permits and default options. */
export const globallockSemaphore = globallockContender(
  "globallock-semaphore",
  `globallock RedisSemaphore (limit ${SEMAPHORE_LIMIT})`,
  (client) => new RedisSemaphore(client, { limit: SEMAPHORE_LIMIT }),
);

/** Every contender by id (the forked worker looks them up by id). */
export const CONTENDERS = Object.fromEntries(
  [
    raw,
    rawDirectGrant,
    rawWakeClaim,
    globallock,
    redlockNoRetry,
    redlockDefault,
    redlock1ms,
    redisSemaphore,
    globallockSemaphore,
    redisSemaphoreSemaphore,
  ].map((c) => [c.id, c]),
);
