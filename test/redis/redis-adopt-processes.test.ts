/**
 * Handing a Redis lease to another process (#19): a child process takes a lease on a real Redis,
 * hands it off, prints the handle and exits without releasing; this process adopts it, keeps it
 * past the end of the old lease (its own keeper extends it), and releases it. On one node, a
 * quorum of three, a Cluster, with RedisSemaphore and a read-write view; then the handles that
 * must be refused. The children run the built package (npm test builds first).
 */
import { execFile } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Cluster, type Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeHandOff } from "../../src/core/hand-off-handle.js";
import {
  InvalidArgumentError,
  type Lease,
  type Locker,
  LockLostError,
  RedisLocker,
  type RedisLockerOptions,
  RedisReadWriteLocker,
  RedisSemaphore,
} from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { assertBuilt } from "../helpers/cli.js";
import { HOST, type RedisServer, startCluster, startServers, stopServers } from "../helpers/redis.js";
import { sleep } from "../helpers/wait.js";

const run = promisify(execFile);
const CHILD = fileURLToPath(new URL("../helpers/redis-hand-off-child.mjs", import.meta.url));
/** The lease length: the old holder's lease ends this long after its hand-off. */
const EXPIRY = 1500;
const OPTIONS = { expiry: EXPIRY, owner: "adopter" } as const;

type Topology = "node" | "quorum" | "cluster";
type Kind = "lock" | "semaphore" | "write";

/** One way to hand a lease over: what the child runs, and the matching lockers here. */
interface Case {
  readonly name: string;
  readonly topology: Topology;
  readonly kind: Kind;
  /** The child's client library. */
  readonly client: "ioredis" | "node-redis";
  readonly weight?: number;
}

const CASES: readonly Case[] = [
  { name: "RedisLocker, one node (the child on node-redis)", topology: "node", kind: "lock", client: "node-redis" },
  { name: "RedisLocker, a quorum of 3", topology: "quorum", kind: "lock", client: "ioredis" },
  { name: "RedisLocker, a Cluster", topology: "cluster", kind: "lock", client: "ioredis" },
  { name: "RedisSemaphore (2 permits of 3)", topology: "node", kind: "semaphore", client: "ioredis", weight: 2 },
  { name: "RedisReadWriteLocker, write view", topology: "node", kind: "write", client: "ioredis" },
];

const deployments = new Map<Topology, RedisServer[]>();
const clients: Array<Redis | Cluster> = [];
const lockers: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  assertBuilt();
  const [node, quorum, cluster] = await Promise.all([startServers(1), startServers(3), startCluster(3)]);
  deployments.set("node", node).set("quorum", quorum).set("cluster", cluster);
}, 60_000);
afterAll(async () => {
  await Promise.allSettled(lockers.map((locker) => locker.close()));
  for (const client of clients) client.disconnect();
  await Promise.all([...deployments.values()].map((servers) => stopServers(servers)));
});

function serversOf(topology: Topology): RedisServer[] {
  const servers = deployments.get(topology);
  if (servers === undefined) throw new Error(`no ${topology} deployment`);
  return servers;
}

/**
 * New connections to `topology` (one client per node for a quorum), like another process's; ready
 * (a Cluster: its slots known) before the first command and its timeout.
 */
async function connect(topology: Topology): Promise<Redis | Cluster | Redis[]> {
  const servers = serversOf(topology);
  const made =
    topology === "cluster"
      ? [new Cluster(servers.map((server) => ({ host: HOST, port: server.port })))]
      : servers.map((server) => server.client());
  for (const client of made) client.on("error", () => undefined);
  clients.push(...made);
  await Promise.all(made.map((client) => (client.status === "ready" ? undefined : once(client, "ready"))));
  return topology === "quorum" ? (made as Redis[]) : (made[0] as Redis | Cluster);
}

/** A new locker of `kind` here, on its own connections. */
async function lockerOf(topology: Topology, kind: Kind, options: RedisLockerOptions = OPTIONS): Promise<Locker> {
  const connection = await connect(topology);
  if (kind === "lock") {
    const locker = new RedisLocker(connection, options);
    lockers.push(locker);
    return locker;
  }
  if (kind === "semaphore") {
    const semaphore = new RedisSemaphore(connection, { ...options, limit: 3 });
    lockers.push(semaphore);
    return semaphore;
  }
  const views = new RedisReadWriteLocker(connection, options);
  lockers.push(views.write);
  return views.write;
}

/** Runs the child: it takes `key`, hands the lease off and exits without releasing. The handle. */
async function handOffInChild(test: Case, key: string): Promise<string> {
  const limit = test.kind === "semaphore" ? { limit: 3 } : {};
  const spec = {
    client: test.client,
    topology: test.topology,
    ports: serversOf(test.topology).map((server) => server.port),
    kind: test.kind,
    key,
    options: { expiry: EXPIRY, owner: "old holder", ...limit },
    weight: test.weight,
  };
  const { stdout } = await run(process.execPath, [CHILD, JSON.stringify(spec)], { timeout: 20_000 });
  const match = /^handle (\S+)$/m.exec(stdout);
  if (match === null) throw new Error(`the child printed no handle: ${stdout}`);
  return match[1] as string;
}

describe("adopting a lease handed off by a process that then died", () => {
  it("adopts, keeps it past the old lease, refuses a second adoption, releases to the next waiter", async () => {
    // Every case at once (the children start in parallel); each adopts as soon as its child printed.
    const runs = CASES.map(async (test) => {
      const key = uniqueKey();
      const adopter = await lockerOf(test.topology, test.kind);
      const rival = await lockerOf(test.topology, test.kind, { ...OPTIONS, owner: "rival" });
      const handle = await handOffInChild(test, key);
      const lease = await adopter.adopt(undefined, handle);
      // The handle was swapped out: adopting it again (from anywhere) is a lost lease.
      await expect(rival.adopt(undefined, handle), test.name).rejects.toBeInstanceOf(LockLostError);
      // A lease handed off here and never adopted: its handle is worthless once the lease ran out.
      const unadopted = await (await adopter.acquire(undefined, `${key}:unadopted`)).handOff();
      return { test, key, adopter, rival, handle, lease, unadopted };
    });
    const adopted = await Promise.all(runs);
    // Past the end of the old holder's lease (and of the unadopted one): every one was handed off
    // before this, for EXPIRY. Only the adopter's keeper kept the adopted ones.
    await sleep(EXPIRY + 250);
    for (const { test, key, adopter, rival, handle, lease, unadopted } of adopted) {
      expect(lease.lost.aborted, test.name).toBe(false);
      lease.assertHeld();
      const view = await rival.inspect(undefined, key);
      expect(
        view.holders.map((holder) => holder.owner),
        test.name,
      ).toEqual(["adopter"]);
      if (test.kind !== "write") expect(view.holders[0]?.weight, test.name).toBe(test.weight ?? 1);
      expect(await rival.tryAcquire(undefined, key, test.weight ? { weight: test.weight } : {}), test.name).toBe(
        undefined,
      );
      // A waiter gets it when the adopter releases (an adopted lease releases like any other).
      const waiting = rival.acquire(AbortSignal.timeout(10_000), key, test.weight ? { weight: test.weight } : {});
      expect(await lease.releaseWithOutcome(), test.name).toBe("released");
      const next: Lease = await waiting;
      expect((await adopter.inspect(undefined, key)).holders.map((holder) => holder.owner)).toEqual(["rival"]);
      await next.release();
      // A released lease's handle, and an expired one's: lost.
      await expect(adopter.adopt(undefined, handle), test.name).rejects.toBeInstanceOf(LockLostError);
      await expect(adopter.adopt(undefined, unadopted), test.name).rejects.toBeInstanceOf(LockLostError);
    }
  }, 30_000);
});

describe("handles that do not belong here", () => {
  it("refuses garbage, another prefix, another topology, another kind of locker, another store", async () => {
    const node = await lockerOf("node", "lock");
    const expectInvalid = (locker: Locker, handle: string) =>
      expect(locker.adopt(undefined, handle)).rejects.toBeInstanceOf(InvalidArgumentError);
    const handOff = async (locker: Locker) => (await locker.acquire(undefined, uniqueKey())).handOff();

    await expectInvalid(node, "garbage");
    await expectInvalid(node, `globallock-lease.v1.${Buffer.from("{").toString("base64url")}`);
    await expectInvalid(node, await handOff(await lockerOf("node", "lock", { ...OPTIONS, prefix: "other:" })));
    // Another topology: a quorum's lock taken over on one of its nodes would be held by two.
    await expectInvalid(await lockerOf("quorum", "lock"), await handOff(node));
    await expectInvalid(node, await handOff(await lockerOf("quorum", "lock")));
    await expectInvalid(await lockerOf("cluster", "lock"), await handOff(node));
    await expectInvalid(node, await handOff(await lockerOf("node", "semaphore")));
    const views = new RedisReadWriteLocker(await connect("node"), OPTIONS);
    lockers.push(views.read);
    await expectInvalid(views.write, await handOff(views.read));
    // A handle of another store (a memory lock's shape: memory cannot hand off, so it is made here).
    const memory = { scope: "memory-lock|memory", key: "k", token: "t", weight: 1, duration: 1000 };
    await expectInvalid(node, encodeHandOff({ ...memory, fencingToken: undefined }));
  });
});

describe("a quorum adoption that does not win a majority", () => {
  it("is undone where it swapped: expired when the key is gone elsewhere, taken when held by another", async () => {
    const servers = serversOf("quorum");
    const admins = servers.map((server) => server.client());
    clients.push(...admins);
    const locker = await lockerOf("quorum", "lock");
    for (const [others, expected] of [
      [null, "expired"],
      ["someone else's token", "taken"],
    ] as const) {
      const key = uniqueKey();
      const handle = await (await locker.acquire(undefined, key, { expiry: 30_000 })).handOff();
      const token = await admins[0]?.get(`globallock:${key}`);
      // Two of three nodes no longer hold the handed-off token.
      for (const admin of admins.slice(1)) {
        if (others === null) await admin.del(`globallock:${key}`);
        else await admin.set(`globallock:${key}`, others, "PX", 30_000);
      }
      const error = await (await lockerOf("quorum", "lock"))
        .adopt(undefined, handle)
        .catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(LockLostError);
      expect((error as LockLostError).reason).toBe(expected);
      // The one node that swapped swapped back: the handle's token is there again.
      expect(await admins[0]?.get(`globallock:${key}`)).toBe(token);
    }
  });

  it("inspect shows the token a majority holds, not a minority's", async () => {
    const admins = serversOf("quorum").map((server) => server.client());
    clients.push(...admins);
    const key = uniqueKey();
    await admins[0]?.set(`globallock:${key}`, "minority/0123", "PX", 30_000);
    const locker = await lockerOf("quorum", "lock");
    expect((await locker.inspect(undefined, key)).holders).toEqual([]);
    await admins[1]?.set(`globallock:${key}`, "minority/0123", "PX", 20_000);
    const [holder] = (await locker.inspect(undefined, key)).holders;
    expect(holder?.owner).toBe("minority");
    // Held by a majority until the second-longest PTTL of the two runs out.
    expect(holder?.expiresInMs).toBeGreaterThan(10_000);
    expect(holder?.expiresInMs).toBeLessThanOrEqual(20_000);
  });
});
