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
import { uniqueKey, whenAborted } from "../contract.js";
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
    const dir = `/globallock/${key}`;
    const nodes = (await childrenOf(dir)).sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)));
    expect(nodes).toHaveLength(4);
    // `wchp`: every watched path, each followed by the sessions watching it.
    const watched = new Map<string, string[]>();
    let path = "";
    for (const line of (await fourLetterWord(fixture.ensemble.members[0]?.clientPort as number, "wchp")).split("\n")) {
      if (line.startsWith("/")) {
        path = line.trim();
        watched.set(path, []);
      } else if (line.trim() !== "") watched.get(path)?.push(line.trim());
    }
    const mine = [...watched].filter(([each]) => each.startsWith(`${dir}/`));
    const ahead = nodes.slice(0, 3).map((node) => `${dir}/${node}`);
    expect(mine.map(([each]) => each).sort()).toEqual(ahead.sort());
    expect(mine.every(([, sessions]) => sessions.length === 1)).toBe(true);
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
