/**
 * The Redis store of a `globallock` invocation (see store.ts), over ioredis clients the CLI creates
 * from `--redis` URLs: on one server a {@link RedisReadWriteLocker} (exclusive runs on its `write`
 * view, `--shared` ones on `read`), on several a {@link RedisLocker} (a Redlock quorum, exclusive).
 */
import type { Redis } from "ioredis";
import { StoreUnavailableError } from "../errors.js";
import { withTimeout } from "../internal/sleep.js";
import type { Locker } from "../locker.js";
import { RedisLocker } from "../redis/redis-locker.js";
import { RedisReadWriteLocker } from "../redis/redis-read-write-locker.js";
// Referenced from doc comments only.
import type { RedisSemaphore } from "../redis/redis-semaphore.js";
import type { CliLockerOptions, OpenStore } from "./store.js";

/** Prefix of the Redis lockers' keys (RedisLocker's default). */
const REDIS_PREFIX = "globallock:";
const CONNECT_TIMEOUT_MS = 5000;

/**
 * Connects to `urls` and opens the locker over them (see the module comment); with `limit`
 * (`--limit N`, one server), a {@link RedisSemaphore} of that limit, loaded only then.
 */
export async function openRedisStore(
  urls: readonly string[],
  lockerOptions: CliLockerOptions,
  shared: boolean,
  limit?: number,
): Promise<OpenStore> {
  let RedisClass: typeof Redis;
  try {
    ({ Redis: RedisClass } = await import("ioredis"));
  } catch (cause) {
    throw new StoreUnavailableError(REDIS_PREFIX, "--redis needs the ioredis package: npm install ioredis", { cause });
  }
  const options = {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 2,
    retryStrategy: (times: number) => Math.min(times * 100, 1000),
  };
  /** Each client's latest connection error (ioredis rejects `connect()` with a vaguer one). */
  const lastErrors = new Map<Redis, Error>();
  const clients = urls.map((url) => {
    const client = new RedisClass(url, options);
    // Later failures surface through the locker's typed errors.
    client.on("error", (error: Error) => lastErrors.set(client, error));
    return client;
  });
  const label = `Redis ${urls.map(redactUrl).join(", ")}`;
  const connected = await Promise.allSettled(
    clients.map((client) => withTimeout(client.connect(), CONNECT_TIMEOUT_MS, () => new Error("timed out connecting"))),
  );
  const failures = connected.flatMap((result, index) => {
    if (result.status === "fulfilled") return [];
    const reason: unknown = lastErrors.get(clients[index] as Redis) ?? result.reason;
    return [`${redactUrl(urls[index] as string)} (${messageOf(reason)})`];
  });
  if (clients.length - failures.length <= clients.length / 2) {
    for (const client of clients) client.disconnect();
    throw new StoreUnavailableError(REDIS_PREFIX, `cannot reach ${failures.join("; ")}`, {
      cause: new AggregateError(connected.flatMap((r) => (r.status === "rejected" ? [r.reason] : []))),
    });
  }
  let locker: Locker;
  try {
    locker = await lockerOver(clients, lockerOptions, shared, limit);
  } catch (error) {
    for (const client of clients) client.disconnect();
    throw error;
  }
  return {
    locker,
    label,
    close: async () => {
      await locker.close();
      for (const client of clients) client.disconnect();
    },
  };
}

/**
 * The locker of a run over `clients`: a {@link RedisSemaphore} with `limit` (refused on a quorum
 * by its constructor), a read-write locker's view on one server, else a {@link RedisLocker}.
 */
async function lockerOver(
  clients: Redis[],
  lockerOptions: CliLockerOptions,
  shared: boolean,
  limit: number | undefined,
): Promise<Locker> {
  if (limit !== undefined) {
    const { RedisSemaphore } = await import("../redis/redis-semaphore.js");
    return new RedisSemaphore(clients, { ...lockerOptions, limit });
  }
  const [only] = clients;
  if (clients.length !== 1 || only === undefined) return new RedisLocker(clients, lockerOptions);
  const readWrite = new RedisReadWriteLocker(only, lockerOptions);
  return shared ? readWrite.read : readWrite.write;
}

/** A URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
