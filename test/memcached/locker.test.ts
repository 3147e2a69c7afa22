/**
 * What the Memcached locker adds to the contract, on real servers: keys Memcached cannot take as
 * they are, bad arguments, the refusals (listing), and its deployment check against servers
 * started the ways that matter (evicting, -M, evicted, -C, gone) and clients that matter.
 */
import Memcached from "memcached";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkDeployment, type Finding, InvalidArgumentError, UnsupportedError } from "../../src/index.js";
import { MEMCACHED_CLIENT_OPTIONS } from "../../src/memcached/client-options.js";
import { MemcachedLocker } from "../../src/memcached/memcached-locker.js";
import { uniqueKey } from "../contracts/contract.js";
import { MemcachedFixture, MemcachedServer } from "../helpers/memcached-harness.js";
import { eventually } from "../helpers/wait.js";

const codes = (found: readonly Finding[]): string[] => found.map((item) => `${item.level}:${item.code}`).sort();

describe("MemcachedLocker", () => {
  let fixture: MemcachedFixture;

  beforeAll(async () => {
    fixture = await MemcachedFixture.start(undefined, ["globallock:", "", "app:globallock:"]);
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  it("locks keys Memcached cannot take as they are (hashed), each on its own and exclusive across lockers", async () => {
    const a = fixture.locker();
    const b = fixture.locker();
    const long = "x".repeat(600);
    const keys = [
      `${uniqueKey()} with spaces`,
      `${uniqueKey()}\u0001\r\n`,
      `${uniqueKey()}$&$'$\`$$`,
      `#${uniqueKey()}`,
      `${uniqueKey()}-ключ-鍵`,
      `${long}${uniqueKey()}-a`,
      `${long}${uniqueKey()}-b`,
      "z".repeat(1024),
    ];
    const releases = await Promise.all(keys.map((key) => a.lock(undefined, key)));
    for (const key of keys) {
      expect((await b.tryLock(undefined, key))[0]).toBe(false);
      expect((await b.inspect(undefined, key)).holders).toHaveLength(1);
    }
    await Promise.all(releases.map((release) => release()));
    for (const key of keys) {
      const [ok, release] = await b.tryLock(undefined, key);
      expect(ok).toBe(true);
      await release();
    }
  });

  it("a plain key is its item (namespace, prefix, key); with no prefix, a key named cas is hashed and works", async () => {
    const key = uniqueKey("plain");
    const lease = await fixture.locker().acquire(undefined, key);
    expect(await fixture.server.command(`get globallock:${key}`)).toMatch(/^VALUE globallock:/);
    await lease.release();
    // The client's namespace comes first; the locker reads its items back through it.
    const spaced = fixture.locker({ expiry: 1000 }, fixture.client({ namespace: "app:" }));
    const inNamespace = await spaced.acquire(undefined, key);
    expect(await fixture.server.command(`get app:globallock:${key}`)).toMatch(/^VALUE app:globallock:/);
    await eventually(() => spaced.leaseStats.extensions >= 1);
    expect(await inNamespace.releaseWithOutcome()).toBe("released");
    const bare = fixture.locker({ prefix: "", expiry: 1000 });
    const cas = await bare.acquire(undefined, "cas");
    expect(await fixture.server.command("get cas")).toBe("END\r\n");
    // Extended (its item read back with `gets`), then released.
    await eventually(() => bare.leaseStats.extensions >= 1);
    expect(() => cas.assertHeld()).not.toThrow();
    expect(await cas.releaseWithOutcome()).toBe("released");
  });

  it("refuses a prefix or client Memcached cannot use, naming the value; listing is refused", async () => {
    const client = fixture.client();
    for (const prefix of ["has space:", "dollar$:", "ключ:", "p".repeat(207), 7, null]) {
      const error = (() => {
        try {
          new MemcachedLocker(client, { prefix: prefix as string });
        } catch (caught) {
          return caught;
        }
      })();
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).argument).toBe("options.prefix");
      expect((error as InvalidArgumentError).received).toBe(prefix);
    }
    for (const bad of [undefined, null, {}, "127.0.0.1:11211"]) {
      expect(() => new MemcachedLocker(bad as never)).toThrow(InvalidArgumentError);
    }
    const spaced = fixture.client({ namespace: "my app:" });
    expect(() => new MemcachedLocker(spaced)).toThrow(/client\.namespace/);
    await expect(fixture.locker().list(undefined)).rejects.toBeInstanceOf(UnsupportedError);
  });
});

describe("checkDeployment on Memcached", () => {
  const servers: MemcachedServer[] = [];
  const clients: Memcached[] = [];
  const lockers: MemcachedLocker[] = [];

  /** A locker on the servers at `location`, through a client with `options` (MEMCACHED_CLIENT_OPTIONS by default). */
  const lockerOn = (location: string | string[], options: Memcached.options = MEMCACHED_CLIENT_OPTIONS) => {
    const client = new Memcached(location, { ...options });
    clients.push(client);
    const locker = new MemcachedLocker(client);
    lockers.push(locker);
    return locker;
  };

  const start = async (args: string[] = []): Promise<MemcachedServer> => {
    const server = await MemcachedServer.start({ args });
    servers.push(server);
    return server;
  };

  afterAll(async () => {
    await Promise.allSettled(lockers.map((locker) => locker.close()));
    for (const client of clients) client.end();
    await Promise.allSettled(servers.map((server) => server.stop()));
  });

  it("evictions: an error on a server that may evict or has, a warning with -M; CAS off is an error", async () => {
    const [evicting, noEvictions, evicted, noCas] = await Promise.all([
      start(),
      start(["-M"]),
      start(["-m", "2"]),
      start(["-M", "-C"]),
    ]);
    expect(codes(await checkDeployment(lockerOn(evicting.location)))).toEqual(["error:memcached-evictions"]);
    expect(codes(await checkDeployment(lockerOn(noEvictions.location)))).toEqual(["warning:memcached-evictions"]);
    // Fill a 2 MB server past its memory: it evicts.
    const filler = lockerOn(evicted.location);
    const client = clients[clients.length - 1] as Memcached;
    const big = "x".repeat(400_000);
    for (let index = 0; index < 12; index++) {
      await new Promise((resolve) => client.set(`fill-${index}`, big, 100, resolve));
    }
    const found = await checkDeployment(filler);
    expect(codes(found)).toEqual(["error:memcached-evictions"]);
    expect(found[0]?.message).toMatch(/has evicted \d+ since it started/);
    expect(codes(await checkDeployment(lockerOn(noCas.location)))).toEqual([
      "error:memcached-cas-disabled",
      "warning:memcached-evictions",
    ]);
  });

  it("the client: several servers, the ping-based reconnection where ping is missing, a server gone", async () => {
    const [one, two] = await Promise.all([start(["-M"]), start(["-M"])]);
    expect(codes(await checkDeployment(lockerOn([one.location, two.location])))).toEqual([
      "warning:memcached-evictions",
      "warning:memcached-evictions",
      "warning:memcached-several-servers",
    ]);
    // The client's defaults (remove: false) reconnect through `ping`: looked up on PATH, read at once.
    const defaults = lockerOn(one.location, {});
    const path = process.env.PATH;
    process.env.PATH = "/nonexistent";
    const checking = checkDeployment(defaults);
    process.env.PATH = path;
    expect(codes(await checking)).toEqual(["error:memcached-client-ping", "warning:memcached-evictions"]);
    const gone = lockerOn(two.location);
    await two.stop();
    const found = await checkDeployment(gone);
    expect(codes(found)).toEqual(["error:memcached-unreachable"]);
    expect(found[0]?.message).toMatch(/could not be checked/);
  });
});
