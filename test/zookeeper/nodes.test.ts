/**
 * What the ZooKeeper lockers leave in ZooKeeper, read with a plain client of the same server:
 * keys as readable node names (listed back), the owner in each node, a waiter watching only the
 * node just before its own, nothing but the prefix node left once every locker closed; and what
 * they do when ZooKeeper changes under them (a node deleted by hand, the session ended), what they
 * refuse, and the deployment check of a single server.
 */
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkDeployment,
  InvalidArgumentError,
  type Lease,
  type LockLostError,
  StoreUnavailableError,
} from "../../src/index.js";
import { ZooKeeperLocker } from "../../src/zookeeper/zookeeper-locker.js";
import { TcpProxy } from "../../support/tcp-proxy.mjs";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { eventually, untilWaiting } from "../helpers/wait.js";
import { fourLetterWord, ZooKeeperFixture } from "../helpers/zookeeper-harness.js";

let fixture: ZooKeeperFixture;
/** A plain client of the server, for looking at (and deleting) nodes. */
let raw: Client;

beforeAll(async () => {
  fixture = await ZooKeeperFixture.start();
  raw = fixture.client();
});
afterAll(async () => {
  await fixture?.stop();
});

/** Runs one client call and resolves with its result. */
function call<T>(send: (done: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => send((error, value) => (error ? reject(error) : resolve(value))));
}

/** The sessions watching each node under `dir`, as `wchp` tells (every watched path, each followed by its sessions). */
async function watchersOf(dir: string): Promise<Map<string, string[]>> {
  const watched = new Map<string, string[]>();
  let path = "";
  for (const line of (await fourLetterWord(fixture.ensemble.members[0]?.clientPort as number, "wchp")).split("\n")) {
    if (line.startsWith("/")) {
      path = line.trim();
      if (path.startsWith(`${dir}/`)) watched.set(path, []);
    } else if (line.trim() !== "") watched.get(path)?.push(line.trim());
  }
  return watched;
}

const childrenOf = (path: string): Promise<string[]> =>
  call<string[]>((done) => raw.getChildren(path, done)).catch(() => []);

describe("ZooKeeper nodes", () => {
  it("keys are readable node names under the prefix (escaped where ZooKeeper refuses), listed back with their owners", async () => {
    const prefix = `/gl-names-${process.pid}`;
    const locker = fixture.locker({ prefix, owner: "names-owner" });
    const keys = ["a/b", "50%", ".", "..", "smile 😀", "ctl\u0001", "zookeeper", "plain"];
    const leases = await Promise.all(keys.map((key) => locker.acquire(undefined, key)));
    expect((await childrenOf(prefix)).sort()).toEqual(
      ["a%2Fb", "50%25", "%2E", "%2E%2E", "smile %uD83D%uDE00", "ctl%01", "zookeeper", "plain"].sort(),
    );
    const listed = await locker.list(undefined);
    expect(listed.map((info) => info.key)).toEqual([...keys].sort());
    expect(listed.every((info) => info.holders.map((holder) => holder.owner).join() === "names-owner")).toBe(true);
    expect((await locker.list(undefined, { prefix: "a" })).map((info) => info.key)).toEqual(["a/b"]);
    await Promise.all(leases.map((lease) => lease.release()));
    // The key nodes are kept while idle for a moment; the locker's close deletes them.
    await locker.close();
    expect(await childrenOf(prefix)).toEqual([]);
  });

  it("a key's node goes once idle here for a moment, and the next attempt makes it again", async () => {
    const prefix = `/gl-idle-${process.pid}`;
    const locker = fixture.locker({ prefix });
    const key = uniqueKey("zk-idle");
    for (let round = 0; round < 3; round++) await (await locker.acquire(undefined, key)).release();
    // Nobody deleted it meanwhile: it is gone once nothing here used it for the idle delay.
    await eventually(async () => !(await childrenOf(prefix)).includes(key), 20_000);
    // And made again by the next attempt.
    const lease = await locker.acquire(undefined, key);
    expect(await childrenOf(prefix)).toContain(key);
    await lease.release();
    await eventually(async () => !(await childrenOf(prefix)).includes(key), 20_000);
  });

  it("a key's node deleted by another client between two uses (and its prefix node too) is made again", async () => {
    const prefix = `/gl-gone-${process.pid}`;
    const client = fixture.client();
    // The creates the locker sends, and what each was answered (a ZooKeeper error code, or 0).
    const creates: Array<[string, number]> = [];
    const create = client.create.bind(client) as (...args: unknown[]) => void;
    (client as { create: unknown }).create = (...args: unknown[]): void => {
      const done = args.pop() as (error: unknown, path: string) => void;
      create(...args, (error: unknown, path: string) => {
        creates.push([args[0] as string, (error as { getCode?: () => number } | null)?.getCode?.() ?? 0]);
        done(error, path);
      });
    };
    const locker = new ZooKeeperLocker(client, { prefix, expiry: 3000 });
    fixture.closables.push(locker);
    const key = uniqueKey("zk-gone");
    const keyNode = `${prefix}/${key}`;
    const remove = (path: string): Promise<boolean> =>
      call<void>((done) => raw.remove(path, (error) => done(error, undefined))).then(
        () => true,
        () => false,
      );
    // Deleted by hand right after a release (unless the locker's own idle drop came first: then again).
    for (const alsoPrefix of [false, true]) {
      for (let tries = 0; ; tries++) {
        expect(tries).toBeLessThan(5);
        await (await locker.acquire(undefined, key)).release();
        const deleted = (await remove(keyNode)) && (!alsoPrefix || (await remove(prefix)));
        creates.length = 0;
        const lease = await locker.acquire(undefined, key);
        expect(lease.lost.aborted).toBe(false);
        await lease.release();
        // The locker knew the key's node there: its node's create was refused (NO_NODE), and it made the key's node again.
        const refused = creates.findIndex(([path, code]) => path.startsWith(`${keyNode}/`) && code === -101);
        if (deleted && refused >= 0) {
          expect(creates.slice(refused + 1).some(([path, code]) => path === keyNode && code === 0)).toBe(true);
          break;
        }
      }
    }
    await locker.close();
    expect(await childrenOf(prefix)).toEqual([]);
  });

  it("a lock's waiters each watch only the node just before their own (no herd)", async () => {
    const key = uniqueKey("zk-herd");
    const holder = fixture.locker();
    const lease = await holder.acquire(undefined, key);
    const waiters = [fixture.locker(), fixture.locker(), fixture.locker()];
    const waits: Array<Promise<Lease>> = [];
    for (const waiter of waiters) {
      waits.push(waiter.acquire(AbortSignal.timeout(20_000), key));
      await untilWaiting(waiter, 1);
    }
    // Once every waiter has joined (its first try, not queued, leaves no node), the queue is four
    // nodes, and each of the first three is watched by one session: the one behind it. (A watch
    // more, anywhere, would stay until its node goes.)
    const dir = `/globallock/${key}`;
    await eventually(async () => {
      const nodes = (await childrenOf(dir)).sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)));
      const watched = await watchersOf(dir);
      const ahead = nodes.slice(0, 3).map((node) => `${dir}/${node}`);
      return (
        nodes.length === 4 &&
        [...watched.keys()].sort().join() === ahead.sort().join() &&
        [...watched.values()].every((sessions) => sessions.length === 1)
      );
    }, 10_000);
    await lease.release();
    for (const waiting of waits) await (await waiting).release();
  });

  it("nothing but the prefix node is left once every locker closed, whatever its callers did", async () => {
    const prefix = `/gl-tidy-${process.pid}`;
    const [lock, peer] = [fixture.locker({ prefix: `${prefix}/lock` }), fixture.locker({ prefix: `${prefix}/lock` })];
    const semaphore = fixture.semaphore(2, { prefix: `${prefix}/semaphore` });
    const rw = fixture.readWrite({ prefix: `${prefix}/rw` });
    const key = uniqueKey("zk-tidy");
    // A lock: held, missed by a try, waited for by one that gives up and one that gets it.
    const held = await lock.acquire(undefined, key);
    expect(await peer.tryAcquire(undefined, key)).toBeUndefined();
    const quitter = new AbortController();
    const gaveUp = peer.acquire(quitter.signal, key).catch((error: unknown) => error);
    await untilWaiting(peer, 1);
    quitter.abort();
    await gaveUp;
    const next = peer.acquire(AbortSignal.timeout(10_000), key);
    await untilWaiting(peer, 1);
    await held.release();
    await (await next).release();
    // A semaphore: all its permits held, a try missed, a waiter served; a read-write key: readers, a waiting writer.
    const permits = await semaphore.acquire(undefined, key, { weight: 2 });
    expect(await semaphore.tryAcquire(undefined, key)).toBeUndefined();
    const one = semaphore.acquire(AbortSignal.timeout(10_000), key);
    await untilWaiting(semaphore, 1);
    await permits.release();
    await (await one).release();
    const readers = await Promise.all([rw.read.acquire(undefined, key), rw.read.acquire(undefined, key)]);
    const writer = rw.write.acquire(AbortSignal.timeout(10_000), key);
    await untilWaiting(rw, 1);
    await Promise.all(readers.map((reader) => reader.release()));
    await (await writer).release();
    // Closed while holding: the node stays until its lease runs out, as a dead holder's would.
    await lock.acquire(undefined, key, { expiry: 1000 });
    await Promise.all([lock.close(), peer.close(), semaphore.close(), rw.close()]);
    await eventually(async () => (await childrenOf(`${prefix}/lock`)).length === 0, 10_000);
    expect(await childrenOf(`${prefix}/semaphore`)).toEqual([]);
    expect(await childrenOf(`${prefix}/rw`)).toEqual([]);
    expect((await childrenOf(prefix)).sort()).toEqual(["lock", "rw", "semaphore"]);
  });

  it("a waiter that gives up while its attempt is in flight leaves no node ahead of its locker's next waiter", async () => {
    const holder = fixture.locker();
    const waiter = fixture.locker();
    const key = uniqueKey("zk-quit");
    // Given up as soon as it waits: its attempt that joins the queue is then often still in flight,
    // and answers after the next waiter's (a stale registration would stand ahead of it for nobody).
    for (let round = 0; round < 16; round++) {
      const held = await holder.acquire(undefined, key);
      const quitter = new AbortController();
      const gaveUp = waiter.acquire(quitter.signal, key).catch((error: unknown) => error);
      await untilWaiting(waiter, 1);
      quitter.abort();
      await gaveUp;
      const next = waiter.acquire(AbortSignal.timeout(10_000), key);
      await untilWaiting(waiter, 1);
      await held.release();
      await (await next).release();
    }
  });

  it('a node deleted by hand is a loss ("taken") at the holder\'s next extension; the key is free', async () => {
    const locker = fixture.locker({ expiry: 1000 });
    const key = uniqueKey("zk-deleted");
    const lease = await locker.acquire(undefined, key);
    const [node] = await childrenOf(`/globallock/${key}`);
    await call<void>((done) => raw.remove(`/globallock/${key}/${node}`, (error) => done(error, undefined)));
    expect(((await whenAborted(lease.lost)) as LockLostError).reason).toBe("taken");
    const other = await fixture.locker().tryAcquire(undefined, key);
    expect(other).toBeDefined();
    expect(await lease.releaseWithOutcome()).not.toBe("released");
    await other?.release();
  });

  it("the session ends: every lease on it is lost at once (expired), and the locker's calls say why", async () => {
    // The locker's client goes through a proxy, so that it stays silent while a second connection
    // takes its session over and closes it: ZooKeeper then deletes the session's nodes at once.
    const proxy = await TcpProxy.start(fixture.ensemble.members[0]?.clientPort as number);
    try {
      const client = zookeeper.createClient(`${proxy.host}:${proxy.port}`, { sessionTimeout: 10_000 });
      fixture.clients.push(client);
      client.connect();
      const locker = new ZooKeeperLocker(client, { expiry: 10_000 });
      fixture.closables.push(locker);
      const keys = [uniqueKey("zk-session"), uniqueKey("zk-session")];
      const leases = await Promise.all(keys.map((key) => locker.acquire(undefined, key)));
      proxy.blackhole(true, { drop: true });
      const options = { sessionId: client.getSessionId(), sessionPassword: client.getSessionPassword() };
      const twin = zookeeper.createClient(fixture.ensemble.connectionString, options as object);
      twin.once("connected", () => twin.close());
      twin.connect();
      await eventually(
        async () => (await Promise.all(keys.map((key) => childrenOf(`/globallock/${key}`)))).flat().length === 0,
      );
      expect(leases.map((lease) => lease.lost.aborted)).toEqual([false, false]);
      // Back in touch, the client hears that its session is gone.
      proxy.blackhole(false);
      proxy.cutAll();
      const reasons = await Promise.all(leases.map((lease) => whenAborted(lease.lost)));
      expect(reasons.map((reason) => (reason as LockLostError).reason)).toEqual(["expired", "expired"]);
      const error = await locker.tryAcquire(undefined, uniqueKey("zk-session")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toMatch(/session expired/);
    } finally {
      await proxy.close();
    }
  });

  it("a connection cut in the middle of a reply: the client connects again (the partial reply dropped), its leases kept", async () => {
    // A proxy that, once armed, forwards half of the next reply of a node's metadata and cuts the connection.
    let armed = false;
    let cut = false;
    const target = fixture.ensemble.members[0]?.clientPort as number;
    const sockets = new Set<Socket>();
    const proxy = createServer((down) => {
      const up = connect(target, "127.0.0.1");
      sockets.add(down).add(up);
      down.on("data", (chunk) => up.write(chunk));
      up.on("data", (chunk: Buffer) => {
        if (!armed || chunk.length < 60) return void down.write(chunk);
        armed = false;
        down.write(chunk.subarray(0, 30), () => {
          cut = true;
          down.destroy();
          up.destroy();
        });
      });
      for (const socket of [down, up])
        socket.on("error", () => undefined).on("close", () => (socket === down ? up : down).destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    try {
      const client = zookeeper.createClient(`127.0.0.1:${(proxy.address() as AddressInfo).port}`, {
        sessionTimeout: 10_000,
      });
      client.connect();
      const locker = new ZooKeeperLocker(client, { expiry: 10_000 });
      const key = uniqueKey("zk-cut");
      const lease = await locker.acquire(undefined, key);
      armed = true;
      await locker.inspect(undefined, key).catch(() => undefined);
      expect(cut).toBe(true);
      const other = await locker.acquire(AbortSignal.timeout(5000), uniqueKey("zk-cut"));
      expect(lease.lost.aborted).toBe(false);
      expect(await Promise.all([lease.releaseWithOutcome(), other.releaseWithOutcome()])).toEqual([
        "released",
        "released",
      ]);
      await locker.close();
      client.close();
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });

  it("ZooKeeper out of reach: calls reject with a StoreUnavailableError carrying the cause, and close does not wait for it", async () => {
    // A port nobody listens on: the client keeps trying to connect, and queues every call meanwhile.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port: free } = probe.address() as AddressInfo;
        probe.close(() => resolve(free));
      });
    });
    const client = zookeeper.createClient(`127.0.0.1:${port}`, { sessionTimeout: 10_000, spinDelay: 100 });
    client.connect();
    try {
      const locker = new ZooKeeperLocker(client, { expiry: 1000 });
      const error = await locker.tryAcquire(undefined, uniqueKey("zk-away")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).cause).toBeInstanceOf(Error);
      const waiting = await locker.lock(AbortSignal.timeout(5000), uniqueKey("zk-away")).catch((e: unknown) => e);
      expect(waiting).toBeInstanceOf(StoreUnavailableError);
      await locker.close();
    } finally {
      client.close();
    }
  });

  it("refuses a lease longer than the session, a prefix that is no ZooKeeper path, and a client that is none", async () => {
    const short = fixture.locker({ sessionTimeout: 2000, expiry: 2000 });
    const error = await short.acquire(undefined, uniqueKey("zk-refused"), { expiry: 5000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).received).toBe(5000);
    for (const prefix of ["globallock", "/", "/a/", "/a//b", "/a/./b", "/a/..", "/zookeeper/x", "/a\u0000b"]) {
      expect(() => new ZooKeeperLocker(raw, { prefix })).toThrow(InvalidArgumentError);
    }
    expect(() => new ZooKeeperLocker({} as never)).toThrow(/client.*node-zookeeper-client/);
  });

  it('checkDeployment: a single server is a warning ("zookeeper-single-member")', async () => {
    const found = await checkDeployment(fixture.locker());
    expect(found.map((item) => `${item.level}:${item.code}`)).toEqual(["warning:zookeeper-single-member"]);
  });
});
