/**
 * `scripts: false` beyond the contract (issue 44): what refuses it, and how its WATCH transactions
 * hold up against a concurrent change, on a real redis-server whose user may not run scripts.
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  InvalidArgumentError,
  RedisLocker,
  type RedisLockerOptions,
  RedisReadWriteLocker,
  RedisSemaphore,
  UnsupportedError,
} from "../src/index.js";
import { uniqueKey } from "./contract.js";
import { RedisServer } from "./helpers/redis.js";

/** The ACL user of the issue, in the server's config: everything but scripting. */
const NO_SCRIPTING_USER = "user app on >pw ~* &* +@all -@scripting\n";

let server: RedisServer;
const clients: Redis[] = [];
const lockers: RedisLocker[] = [];

beforeAll(async () => {
  server = await RedisServer.start({ config: NO_SCRIPTING_USER });
});
afterAll(async () => {
  await Promise.allSettled(lockers.map((locker) => locker.close()));
  for (const client of clients) client.disconnect();
  await server?.stop();
});

/** A new client as the user that may not run scripts. */
function app(): Redis {
  const client = server.client({ username: "app", password: "pw" });
  clients.push(client);
  return client;
}

/** A new client as the default user (any command). */
function admin(): Redis {
  const client = server.client();
  clients.push(client);
  return client;
}

function scriptless(options: RedisLockerOptions = {}): RedisLocker {
  const locker = new RedisLocker(app(), { scripts: false, ...options });
  lockers.push(locker);
  return locker;
}

describe("what refuses scripts: false", () => {
  it("a value that is not a boolean is an InvalidArgumentError naming it, before anything is sent", () => {
    for (const bad of ["no", 0, null]) {
      let caught: unknown;
      try {
        new RedisLocker(app(), { scripts: bad as never });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(InvalidArgumentError);
      expect((caught as InvalidArgumentError).argument).toBe("options.scripts");
      expect((caught as InvalidArgumentError).received).toBe(bad);
    }
  });

  it("a Redlock quorum, RedisSemaphore and RedisReadWriteLocker refuse it with an UnsupportedError naming it", () => {
    expect(() => new RedisLocker([app(), app(), app()], { scripts: false })).toThrow(UnsupportedError);
    expect(() => new RedisLocker([app(), app(), app()], { scripts: false })).toThrow(
      /options\.scripts: false needs one Redis node.*not a Redlock quorum of 3 nodes/,
    );
    expect(() => new RedisSemaphore(app(), { limit: 2, scripts: false })).toThrow(
      /RedisSemaphore needs Lua scripts .*options\.scripts: false is for RedisLocker only/,
    );
    expect(() => new RedisReadWriteLocker(app(), { scripts: false })).toThrow(
      /RedisReadWriteLocker needs Lua scripts .*options\.scripts: false is for RedisLocker only/,
    );
    expect(() => new RedisSemaphore(app(), { limit: 2, scripts: false })).toThrow(UnsupportedError);
  });

  it("scripts: true is the default and refuses such a user at the first attempt; scripts: false locks", async () => {
    const key = uniqueKey();
    const locker = new RedisLocker(app(), { scripts: true });
    lockers.push(locker);
    await expect(locker.tryLock(undefined, key)).rejects.toBeInstanceOf(UnsupportedError);
    expect(await admin().exists(`globallock:${key}`)).toBe(0);
    const lease = await scriptless().acquire(undefined, key);
    expect(await admin().exists(`globallock:${key}`)).toBe(1);
    expect(await lease.releaseWithOutcome()).toBe("released");
    expect(await admin().exists(`globallock:${key}`)).toBe(0);
  });
});
