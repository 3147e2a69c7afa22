/**
 * A busy process must not make a healthy store read as down (issue #17, item 1): a reply already
 * waiting in the socket wins over its timeout, and a burst of calls from many lockers on one key
 * has exactly one winner, the rest `false`, and no error — on real redis-server and PostgreSQL
 * processes, through ioredis, node-redis, a Redlock quorum and pg.
 *
 * "A busy process" is made without any clock: the test blocks its own event loop (a synchronous
 * loop, like a burst of calls or a long GC pause would) for longer than the command timeout, right
 * after sending a call the store answers at once.
 */
import type { Pool, PoolClient } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Lease, type Locker, RedisLocker, StoreUnavailableError } from "../../src/index.js";
import { destroyQuietly, nodeRedisClient, type TestNodeRedis } from "../helpers/node-redis.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { uniqueKey } from "./contract.js";

/** Keeps this process's event loop busy for `ms` (no timer, no socket read runs meanwhile). */
function stallEventLoop(ms: number): void {
  const until = performance.now() + ms;
  let spins = 0;
  while (performance.now() < until) spins += 1;
  expect(spins).toBeGreaterThan(0);
}

/**
 * A pool whose connections stall this process right after sending the next statement once
 * `armed.stall` is set: the statement is on the wire (pg sends it inside `query`), and its answer
 * arrives while the event loop is blocked. (The PostgreSQL locker sends each statement a few
 * promise hops after the call, so a stall right after the call would come before the send.)
 */
function stallingPool(pool: Pool, armed: { stall: number }): Pool {
  const connect = pool.connect.bind(pool) as () => Promise<PoolClient>;
  return Object.assign(Object.create(pool) as Pool, {
    connect: async () => {
      const client = await connect();
      const query = client.query.bind(client) as (config: unknown) => Promise<unknown>;
      return Object.assign(client, {
        query: (config: unknown) => {
          const answer = query(config);
          const ms = armed.stall;
          armed.stall = 0;
          if (ms > 0) stallEventLoop(ms);
          return answer;
        },
      });
    },
  });
}

/** What a burst of `count` concurrent tryAcquire calls spread over `lockers` ended with. */
async function burst(lockers: readonly Locker[], key: string, count: number) {
  const settled = await Promise.allSettled(
    Array.from({ length: count }, (_, index) => (lockers[index % lockers.length] as Locker).tryAcquire(undefined, key)),
  );
  const winners: Lease[] = [];
  const errors: unknown[] = [];
  let refused = 0;
  for (const result of settled) {
    if (result.status === "rejected") errors.push(result.reason);
    else if (result.value === undefined) refused += 1;
    else winners.push(result.value);
  }
  return { winners, refused, errors };
}

/** Asserts one winner and `count - 1` refusals, no error; then releases the winner. */
async function expectOneWinner(outcome: Awaited<ReturnType<typeof burst>>, count: number): Promise<Lease> {
  expect(outcome.errors.map(String)).toEqual([]);
  expect(outcome.winners).toHaveLength(1);
  expect(outcome.refused).toBe(count - 1);
  return outcome.winners[0] as Lease;
}

/** How a store is tried. */
interface BurstCase {
  /** Concurrent calls per burst. */
  readonly calls: number;
  /** Whether to try the shortest expiry too (see the quorum's case). */
  readonly shortestExpiry: boolean;
  /**
   * A quorum's votes can split: concurrent attempts each take some nodes and none a majority, and
   * all fail (each a correct `false`: the key was contended). Then a burst may have no winner.
   */
  readonly splitVotes: boolean;
  /**
   * The command timeout of the shortest-expiry burst, when not the default `expiry / 4`.
   * PostgreSQL's is `expiry / 2 - 1`: its burst keeps ten server processes busy beside this one,
   * and on a machine running other test files a starved server can genuinely take longer than
   * 50 ms to answer (a correct timeout, not a healthy store read as down).
   */
  readonly shortOperationTimeout?: number;
}

/** Most stores' case: 10,000 calls, the shortest expiry too, no split votes. */
const DEFAULT_CASE: BurstCase = { calls: 10_000, shortestExpiry: true, splitVotes: false };

/** The shared cases: a stall after the call, and bursts. */
function burstSuite(
  name: string,
  lockerFor: (options: { expiry?: number; operationTimeout?: number }) => Locker,
  { calls, shortestExpiry, splitVotes, shortOperationTimeout }: BurstCase = DEFAULT_CASE,
): void {
  const many = calls.toLocaleString("en");
  describe(name, () => {
    it("a call answered while this process was stalled past the command timeout succeeds, and so does its release", async () => {
      const locker = lockerFor({ expiry: 2000, operationTimeout: 100 });
      const key = uniqueKey("stall");
      const pending = locker.tryAcquire(undefined, key);
      stallEventLoop(400);
      const lease = await pending;
      expect(lease).toBeDefined();
      const releasing = lease?.releaseWithOutcome();
      stallEventLoop(400);
      expect(await releasing).toBe("released");
      // The store really was free again.
      const again = await locker.tryAcquire(undefined, key);
      expect(again).toBeDefined();
      await again?.release();
    });

    it(`${many} concurrent tryLock from 10 lockers on one key (default expiry): one live winner, the rest false, no error`, async () => {
      const lockers = Array.from({ length: 10 }, () => lockerFor({}));
      const outcome = await burst(lockers, uniqueKey("burst"), calls);
      if (splitVotes && outcome.winners.length === 0) {
        expect(outcome.errors.map(String)).toEqual([]);
        expect(outcome.refused).toBe(calls);
        return;
      }
      const winner = await expectOneWinner(outcome, calls);
      expect(winner.lost.aborted).toBe(false);
      expect(await winner.releaseWithOutcome()).toBe("released");
    });

    // With a short lease a winner's lease can run out while this process still works through the
    // burst's answers (a pause longer than the lease, which no lease survives); a later call may
    // then take the free key. Never two at once: at most one winner still holds its lease.
    // The shortest lease (200 ms) is shorter than the stalls of a loaded machine: there the store
    // can be genuinely out of reach (a server not scheduled within the 50 ms timeout; PostgreSQL
    // ending a session left idle for a lease), so its row accepts StoreUnavailableErrors, and
    // nothing else; the rows above keep "no error" for a busy process and a healthy store.
    for (const expiry of shortestExpiry ? [2000, 200] : [2000]) {
      const operationTimeout = (expiry === 200 ? shortOperationTimeout : undefined) ?? Math.min(2000, expiry / 4);
      const errorsAllowed = expiry === 200;
      it(`the same burst with expiry ${expiry} (a ${operationTimeout} ms command timeout): a winner, never two at once, ${errorsAllowed ? "no error but the store's" : "no error"}`, async () => {
        const lockers = Array.from({ length: 10 }, () => lockerFor({ expiry, operationTimeout }));
        const { winners, refused, errors } = await burst(lockers, uniqueKey("burst-short"), calls);
        if (errorsAllowed) {
          expect(errors.filter((error) => !(error instanceof StoreUnavailableError)).map(String)).toEqual([]);
        } else expect(errors.map(String)).toEqual([]);
        expect(winners.length).toBeGreaterThanOrEqual(splitVotes || errors.length > 0 ? 0 : 1);
        expect(winners.length + refused + errors.length).toBe(calls);
        const holding = winners.filter((lease) => {
          try {
            lease.assertHeld();
            return true;
          } catch {
            return false;
          }
        });
        expect(holding.length).toBeLessThanOrEqual(1);
        await Promise.all(winners.map((lease) => lease.release()));
      });
    }
  });
}

describe("a busy process and a healthy store", () => {
  let redis: RedisFixture;
  let quorum: RedisFixture;
  let postgres: PostgresFixture;
  const nodeRedisClients: TestNodeRedis[] = [];
  const closers: Locker[] = [];

  beforeAll(async () => {
    [redis, quorum, postgres] = await Promise.all([
      RedisFixture.start(1),
      RedisFixture.start(3),
      PostgresFixture.start(),
    ]);
  });
  afterAll(async () => {
    await Promise.allSettled(closers.map((locker) => locker.close()));
    for (const client of nodeRedisClients) destroyQuietly(client);
    await Promise.allSettled([redis?.stop(), quorum?.stop(), postgres?.stop()]);
  });

  burstSuite("one Redis node (ioredis, a client per locker)", (options) => redis.locker(options));

  const shared: { client?: ReturnType<RedisFixture["admin"]> } = {};
  burstSuite("one Redis node (ioredis, one client shared by every locker)", (options) => {
    shared.client ??= redis.admin();
    const locker = new RedisLocker(shared.client, options);
    closers.push(locker);
    return locker;
  });

  const nodeRedis: { client?: TestNodeRedis } = {};
  describe("node-redis", () => {
    beforeAll(async () => {
      nodeRedis.client = await nodeRedisClient(redis.servers[0] as never);
      nodeRedisClients.push(nodeRedis.client);
    });
    burstSuite("one Redis node (node-redis, one client shared by every locker)", (options) => {
      const locker = new RedisLocker(nodeRedis.client as TestNodeRedis, options);
      closers.push(locker);
      return locker;
    });
  });

  // A quorum attempt costs several times a single node's (three nodes, and redlock's clean-up of
  // every failed attempt), so its burst is smaller. With a 200 ms lease such a burst keeps this
  // process busy past every win's lease, retries included: no winner (never an error, never two).
  // Its votes can also split (see BurstCase): a burst may end with no winner, never with two.
  burstSuite("a Redlock quorum of 3 nodes", (options) => quorum.locker(options), {
    calls: 3000,
    shortestExpiry: false,
    splitVotes: true,
  });

  burstSuite("PostgreSQL", (options) => postgres.locker(options), { ...DEFAULT_CASE, shortOperationTimeout: 99 });

  it("PostgreSQL: a statement answered while this process was stalled past the timeout succeeds, and the session lives on", async () => {
    const armed = { stall: 0 };
    const locker = postgres.locker({ expiry: 2000, operationTimeout: 100 }, stallingPool(postgres.pool(), armed));
    const warm = await locker.tryAcquire(undefined, uniqueKey("pg-warm"));
    await warm?.release();
    const key = uniqueKey("pg-stall");
    armed.stall = 400;
    const lease = await locker.tryAcquire(undefined, key);
    expect(armed.stall).toBe(0);
    expect(lease).toBeDefined();
    expect(lease?.lost.aborted).toBe(false);
    armed.stall = 400;
    expect(await lease?.releaseWithOutcome()).toBe("released");
    const again = await locker.tryAcquire(undefined, key);
    expect(again).toBeDefined();
    await again?.release();
  });

  it("2,000 concurrent lock calls from 50 Redis lockers (expiry 2000) all get the key, one at a time", async () => {
    const lockers = Array.from({ length: 50 }, () => redis.locker({ expiry: 2000 }));
    const key = uniqueKey("lock-burst");
    let inside = 0;
    let overlaps = 0;
    const errors: unknown[] = [];
    await Promise.all(
      Array.from({ length: 2000 }, async (_, index) => {
        try {
          const release = await (lockers[index % lockers.length] as Locker).lock(AbortSignal.timeout(120_000), key);
          inside += 1;
          if (inside > 1) overlaps += 1;
          await Promise.resolve();
          inside -= 1;
          await release();
        } catch (error) {
          errors.push(error);
        }
      }),
    );
    expect(errors.map(String)).toEqual([]);
    expect(overlaps).toBe(0);
  }, 180_000);

  it("an extension answered while this process was stalled past the lease's deadline keeps the lease", async () => {
    // Once armed, the client stalls this process just after sending its next script call: the
    // lease keeper's extension (the lean grant is a plain SET; no other script runs meanwhile).
    const client = redis.admin();
    const armed = { stall: 0 };
    // Every command goes through sendCommand (ioredis's methods, and the commands the locker
    // builds itself).
    const sendCommand = client.sendCommand.bind(client) as (command: { name: string }) => Promise<unknown>;
    Object.assign(client, {
      sendCommand: (command: { name: string }) => {
        const answer = sendCommand(command);
        const ms = command.name === "evalsha" ? armed.stall : 0;
        armed.stall = 0;
        // Stalled from the check phase, after this loop turn's poll: the keeper's deadline timer
        // is armed, and the answer arrives during the stall.
        if (ms > 0) setImmediate(() => stallEventLoop(ms));
        return answer;
      },
    });
    const locker = new RedisLocker(client, { expiry: 1000, operationTimeout: 100 });
    closers.push(locker);
    const lease = await locker.acquire(undefined, uniqueKey("stalled-extension"));
    // Sent about half-way through the lease; the stall ends well past the lease's deadline, with
    // the extension's answer (a new lease from when it was sent) waiting in the socket.
    armed.stall = 900;
    while (armed.stall > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(lease.lost.aborted).toBe(false);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("a server that does not answer still times out, with a message for a single node (no quorum)", async () => {
    const locker = redis.locker({ expiry: 2000, operationTimeout: 100 });
    const paused = redis.admin();
    const key = uniqueKey("paused");
    // CLIENT PAUSE holds every client's writes: the attempt (a write) is never answered in time.
    await paused.call("CLIENT", "PAUSE", "1500", "WRITE");
    const error = await locker.tryAcquire(undefined, key).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(
      /^Redis acquire of ".*" failed: Redis server did not answer within 100 ms$/,
    );
    expect((error as Error).message).not.toMatch(/quorum/);
  });
});
