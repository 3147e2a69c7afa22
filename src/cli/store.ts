/**
 * The store of a `globallock` invocation: a {@link FileLocker} (the default) or a
 * {@link RedisLocker} over clients the CLI creates from `--redis` URLs. `status` and the waiting
 * line ask its locker's `inspect` who holds a key.
 */
import type { Redis } from "ioredis";
import { StoreUnavailableError } from "../errors.js";
import { FileLocker } from "../file/file-locker.js";
import { withTimeout } from "../internal/sleep.js";
import type { Locker } from "../locker.js";
import { RedisLocker } from "../redis/redis-locker.js";
import type { StoreChoice } from "./args.js";

/** An open store. */
export interface OpenStore {
  readonly locker: Locker;
  /** For messages: `file store <dir>` or `Redis <host:port>[, …]`. */
  readonly label: string;
  /** Closes the locker and the store's connections. */
  close(): Promise<void>;
}

/** Prefix of the Redis lockers' keys (RedisLocker's default). */
const REDIS_PREFIX = "globallock:";
const CONNECT_TIMEOUT_MS = 5000;

/** The locker options the command line sets: the default lease (`--expiry`) and `--owner`. */
export interface CliLockerOptions {
  readonly expiry?: number | undefined;
  readonly owner?: string | undefined;
}

/** Opens the store chosen on the command line, with the locker options given there. */
export function openStore(choice: StoreChoice, options: CliLockerOptions = {}): Promise<OpenStore> {
  return choice.kind === "file" ? openFileStore(choice.directory, options) : openRedisStore(choice.urls, options);
}

async function openFileStore(directory: string | undefined, options: CliLockerOptions): Promise<OpenStore> {
  const locker = new FileLocker({ directory, ...options });
  return { locker, label: `file store ${locker.directory}`, close: () => locker.close() };
}

async function openRedisStore(urls: readonly string[], lockerOptions: CliLockerOptions): Promise<OpenStore> {
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
  const locker = new RedisLocker(clients.length === 1 ? (clients[0] as Redis) : clients, lockerOptions);
  return {
    locker,
    label,
    close: async () => {
      await locker.close();
      for (const client of clients) client.disconnect();
    },
  };
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
