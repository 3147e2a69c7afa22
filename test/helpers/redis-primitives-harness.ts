/**
 * Contract harnesses for the counted Redis lockers (RedisSemaphore, RedisReadWriteLocker) on any
 * Redis deployment: give it a way to connect a new client (one node or a Cluster), and every locker
 * gets its own client, like a separate process sharing the Redis.
 */
import type { Cluster, Redis } from "ioredis";
import {
  type Locker,
  RedisLocker,
  type RedisLockerOptions,
  RedisReadWriteLocker,
  RedisSemaphore,
} from "../../src/index.js";
import type { LockerHarness } from "../contracts/contract.js";
import type { ReadWriteHarness } from "../contracts/read-write-contract.js";
import type { SemaphoreHarness } from "../contracts/semaphore-contract.js";

/**
 * A Redis deployment the harnesses share: started once, stopped after the last harness's cleanup.
 * `connect` makes what one locker needs (by default an ioredis client; node-redis harnesses connect
 * asynchronously: test/helpers/node-redis.ts).
 */
export class SharedDeployment<Connection = Redis | Cluster> {
  readonly #start: () => Promise<{ connect(): Connection; stop(): Promise<void> }>;
  #running: Promise<{ connect(): Connection; stop(): Promise<void> }> | undefined;
  #users = 0;

  constructor(start: () => Promise<{ connect(): Connection; stop(): Promise<void> }>) {
    this.#start = start;
  }

  /** Starts the deployment if needed; pair with {@link leave}. */
  async join(): Promise<() => Connection> {
    this.#users += 1;
    this.#running ??= this.#start();
    const running = await this.#running;
    return () => running.connect();
  }

  /** Stops the deployment once every user has left. */
  async leave(): Promise<void> {
    this.#users -= 1;
    if (this.#users > 0 || this.#running === undefined) return;
    const running = this.#running;
    this.#running = undefined;
    await (await running).stop();
  }
}

const WAKE_ONLY: RedisLockerOptions = { backoff: { min: 20_000, max: 20_000 } };

/** Lockers made by one harness, closed (with their clients) by its cleanup. */
class Made {
  readonly #closables: Array<{ close(): Promise<void> }> = [];
  readonly #clients: Array<Redis | Cluster> = [];

  add<T extends { close(): Promise<void> }>(closable: T, client: Redis | Cluster): T {
    this.#closables.push(closable);
    this.#clients.push(client);
    return closable;
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.#closables.map((closable) => closable.close()));
    for (const client of this.#clients) client.disconnect();
  }
}

/**
 * A lock contract harness whose lockers `make` builds, each on its own client (its `close()` is
 * called at cleanup; it may return a view of what it closes).
 */
async function lockContractHarness(
  deployment: SharedDeployment,
  make: (
    client: Redis | Cluster,
    options: RedisLockerOptions,
  ) => { closable: { close(): Promise<void> }; locker: Locker },
): Promise<LockerHarness> {
  const connect = await deployment.join();
  const made = new Made();
  const create = async (options?: { wakeOnly?: boolean }): Promise<Locker> => {
    const client = connect();
    const { closable, locker } = make(client, options?.wakeOnly ? WAKE_ONLY : {});
    made.add(closable, client);
    return locker;
  };
  return {
    create,
    peer: (_locker, options) => create(options),
    fencing: true,
    handOff: true,
    async cleanup() {
      await made.close();
      await deployment.leave();
    },
  };
}

/** The lock contract's harness for `RedisLocker` (for suites over any Locker, such as lockAll's). */
export function lockerHarness(deployment: SharedDeployment): Promise<LockerHarness> {
  return lockContractHarness(deployment, (client, options) => {
    const locker = new RedisLocker(client, options);
    return { closable: locker, locker };
  });
}

/** The lock contract's harness for `RedisSemaphore({ limit: 1 })`. */
export function semaphoreAsLockHarness(deployment: SharedDeployment): Promise<LockerHarness> {
  return lockContractHarness(deployment, (client, options) => {
    const locker = new RedisSemaphore(client, { limit: 1, ...options });
    return { closable: locker, locker };
  });
}

/** The lock contract's harness for the `write` view of `RedisReadWriteLocker`. */
export function writeViewHarness(deployment: SharedDeployment): Promise<LockerHarness> {
  return lockContractHarness(deployment, (client, options) => {
    const readWrite = new RedisReadWriteLocker(client, options);
    return { closable: readWrite, locker: readWrite.write };
  });
}

/** The semaphore contract's harness for `RedisSemaphore`. */
export async function semaphoreHarness(deployment: SharedDeployment): Promise<SemaphoreHarness> {
  const connect = await deployment.join();
  const made = new Made();
  const limits = new WeakMap<Locker, number>();
  const create = async (options: { limit: number; wakeOnly?: boolean }): Promise<Locker> => {
    const client = connect();
    const semaphore = new RedisSemaphore(client, { limit: options.limit, ...(options.wakeOnly ? WAKE_ONLY : {}) });
    limits.set(semaphore, options.limit);
    return made.add(semaphore, client);
  };
  return {
    create,
    peer: (locker, options) => create({ limit: limits.get(locker) ?? 1, ...options }),
    expires: true,
    async cleanup() {
      await made.close();
      await deployment.leave();
    },
  };
}

/** The read-write contract's harness for `RedisReadWriteLocker`. */
export async function readWriteHarness(deployment: SharedDeployment): Promise<ReadWriteHarness> {
  const connect = await deployment.join();
  const made = new Made();
  const create = async (options?: { wakeOnly?: boolean }): Promise<RedisReadWriteLocker> => {
    const client = connect();
    return made.add(new RedisReadWriteLocker(client, options?.wakeOnly ? WAKE_ONLY : {}), client);
  };
  return {
    create,
    peer: (_rw, options) => create(options),
    fencing: true,
    async cleanup() {
      await made.close();
      await deployment.leave();
    },
  };
}
