/**
 * The diagnostics channels (src/diagnostics.ts) on FileLocker (a temporary directory),
 * PostgresLocker and PostgresReadWriteLocker (a PostgreSQL server started here), MySqlLocker, and
 * CombinedLocker (over a MemoryLocker and a RedisLocker on a redis-server started here): the shared
 * suite of diagnostics-contract.ts, then what each store adds — extensions, losses to real faults,
 * release outcomes — and that nothing is timed or published while nobody listens. The shared suite
 * also runs on the semaphores of files, PostgreSQL and MySQL, the table lockers, ZooKeeper and
 * Memcached (store-subjects.ts).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import diagnostics_channel from "node:diagnostics_channel";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ACQUIRE_CHANNEL,
  type AcquireMessage,
  CombinedLocker,
  EXTEND_CHANNEL,
  FileLocker,
  type FileLockerOptions,
  type Lease,
  LOST_CHANNEL,
  type Locker,
  type LockerKind,
  LockLostError,
  MemoryLocker,
  type PostgresLocker,
  PostgresReadWriteLocker,
  RedisLocker,
  StoreUnavailableError,
} from "../../src/index.js";
import { freePort as freePostgresPort } from "../../support/postgres-server.mjs";
import { uniqueKey } from "../contracts/contract.js";
import { diagnosticsContract, type Subject } from "../contracts/diagnostics-contract.js";
import { type Recorder, recording } from "../helpers/diagnostics-recorder.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually, sleep } from "../helpers/wait.js";
import { RECORD_KINDS, StoreSubjects, storeSubjects } from "./store-subjects.js";

let directory: string;
let postgres: PostgresFixture | undefined;
let mysql: MySqlFixture | undefined;
let redisServers: RedisServer[] = [];
/** The stores of the subjects of store-subjects.ts. */
let stores: StoreSubjects | undefined;
const clients: Redis[] = [];
const closables: Array<{ close(): Promise<void> }> = [];

function keep<T extends { close(): Promise<void> }>(closable: T): T {
  closables.push(closable);
  return closable;
}

function redisClient(): Redis {
  const [server] = redisServers;
  if (server === undefined) throw new Error("no redis-server");
  const created = server.client();
  clients.push(created);
  return created;
}

function fixture(): PostgresFixture {
  if (postgres === undefined) throw new Error("no PostgreSQL server");
  return postgres;
}

/** A FileLocker on the shared temporary directory; a waiter wakes only on a watched release. */
function fileLocker(options: FileLockerOptions = {}): FileLocker {
  return keep(new FileLocker({ directory, backoff: { min: 20_000, max: 20_000 }, ...options }));
}

beforeAll(async () => {
  directory = tempLockDirectory("diagnostics");
  const postgresStarting = PostgresFixture.start();
  const mysqlStarting = MySqlFixture.start();
  const [started, servers, maria, others] = await Promise.allSettled([
    postgresStarting,
    startServers(1),
    mysqlStarting,
    StoreSubjects.start(postgresStarting, mysqlStarting),
  ]);
  if (started.status === "fulfilled") postgres = started.value;
  if (servers.status === "fulfilled") redisServers = servers.value;
  if (maria.status === "fulfilled") mysql = maria.value;
  if (others.status === "fulfilled") stores = others.value;
  for (const outcome of [started, servers, maria, others]) if (outcome.status === "rejected") throw outcome.reason;
});

afterAll(async () => {
  await stores?.stop();
  await Promise.allSettled(closables.map((closable) => closable.close()));
  for (const created of clients) created.disconnect();
  await Promise.allSettled([postgres?.stop(), mysql?.stop(), stopServers(redisServers)]);
  rmSync(directory, { recursive: true, force: true });
});

const subjects: Subject[] = [
  {
    kind: "file-lock",
    weight: 1,
    setup: () => {
      const peer = fileLocker();
      return { locker: fileLocker(), block: (key) => peer.acquire(undefined, key) };
    },
  },
  {
    kind: "postgres-lock",
    weight: 1,
    setup: () => {
      const peer = fixture().locker();
      return { locker: fixture().locker(), block: (key) => peer.acquire(undefined, key) };
    },
  },
  {
    kind: "postgres-read",
    weight: 1,
    setup: () => {
      const peer = keep(new PostgresReadWriteLocker(fixture().pool()));
      return {
        locker: keep(new PostgresReadWriteLocker(fixture().pool())).read,
        block: (key) => peer.write.acquire(undefined, key),
      };
    },
  },
  {
    kind: "postgres-write",
    weight: 1,
    setup: () => {
      const peer = keep(new PostgresReadWriteLocker(fixture().pool()));
      return {
        locker: keep(new PostgresReadWriteLocker(fixture().pool())).write,
        block: (key) => peer.read.acquire(undefined, key),
      };
    },
  },
  {
    kind: "mysql-lock",
    weight: 1,
    setup: () => {
      if (mysql === undefined) throw new Error("no MariaDB server");
      const peer = mysql.locker();
      return { locker: mysql.locker(), block: (key) => peer.acquire(undefined, key) };
    },
  },
  {
    kind: "combined-lock",
    weight: 1,
    setup: () => {
      // The blocker is another CombinedLocker over the same members: it holds the key on both.
      const members = [keep(new MemoryLocker()), keep(new RedisLocker(redisClient()))];
      const peer = keep(new CombinedLocker(members));
      return { locker: keep(new CombinedLocker(members)), block: (key) => peer.acquire(undefined, key) };
    },
  },
];

diagnosticsContract([
  ...subjects,
  ...storeSubjects(() => {
    if (stores === undefined) throw new Error("the stores did not start");
    return stores;
  }),
]);

/** The name of a message's channel in a recorder's `order`, with the message's kind. */
function channelsOf(recorder: Recorder, kinds: readonly LockerKind[]): string[] {
  return recorder.order
    .filter(([name, message]) => name !== ACQUIRE_CHANNEL && kinds.includes((message as { kind: LockerKind }).kind))
    .map(([name, message]) => `${name} ${(message as { kind: LockerKind }).kind}`);
}

describe("FileLocker", () => {
  it("extensions: one message per hold; its lock directory taken away: extend taken, then lost", async () => {
    const locker = fileLocker({ expiry: 400 });
    const key = uniqueKey("file-diag");
    let released: string | undefined;
    const recorder = await recording(async (live) => {
      const lease = await locker.acquire(undefined, key);
      await eventually(() => live.extends.some((m) => m.locker === locker), 3000);
      lease.assertHeld();
      rmSync(locker.lockPath(key), { recursive: true, force: true });
      await eventually(() => lease.lost.aborted, 3000);
      released = await lease.releaseWithOutcome();
    });
    const extensions = recorder.extends.filter((m) => m.locker === locker);
    expect(extensions[0]).toMatchObject({ key, keys: [key], count: 1, kind: "file-lock", outcome: "extended" });
    expect(extensions[0]?.error).toBeUndefined();
    expect(extensions[0]?.lagMs).toBeGreaterThanOrEqual(0);
    expect(extensions[0]?.elapsedMs).toBeGreaterThanOrEqual(0);
    expect(extensions.at(-1)).toMatchObject({ key, outcome: "taken", count: 1 });
    expect(recorder.lost).toEqual([
      { key, locker, kind: "file-lock", reason: "taken", error: expect.any(LockLostError), expected: false },
    ]);
    expect(released).not.toBe("released");
    expect(recorder.releases).toEqual([
      { key, locker, kind: "file-lock", outcome: released, heldMs: expect.any(Number) },
    ]);
    expect(channelsOf(recorder, ["file-lock"]).slice(-3)).toEqual([
      `${EXTEND_CHANNEL} file-lock`,
      `${LOST_CHANNEL} file-lock`,
      "globallock:release file-lock",
    ]);
  });

  it("autoExtend: false reaching its expiry: an expected loss, no extension, a release that found it expired", async () => {
    const locker = fileLocker();
    const key = uniqueKey("file-diag");
    const recorder = await recording(async () => {
      const lease = await locker.acquire(undefined, key, { autoExtend: false, expiry: 250 });
      await eventually(() => lease.lost.aborted, 3000);
      expect(await lease.releaseWithOutcome()).toBe("expired");
    });
    expect(recorder.lost).toEqual([
      { key, locker, kind: "file-lock", reason: "expired", error: expect.any(LockLostError), expected: true },
    ]);
    expect(recorder.extends.filter((m) => m.locker === locker)).toEqual([]);
    expect(recorder.releases).toEqual([expect.objectContaining({ key, locker, outcome: "expired" })]);
  });

  it("a lock directory that cannot be created: outcome error with the StoreUnavailableError, no attempt", async () => {
    const blocker = join(directory, `a-file-${uniqueKey()}`);
    writeFileSync(blocker, "not a directory");
    const locker = keep(new FileLocker({ directory: join(blocker, "locks") }));
    const recorder = await recording(async () => {
      await expect(locker.lock(undefined, uniqueKey())).rejects.toBeInstanceOf(StoreUnavailableError);
    });
    const events = recorder.acquiresOf(locker);
    expect(events.map((e) => e.event)).toEqual(["start", "end", "error", "asyncStart", "asyncEnd"]);
    expect(events[4]).toMatchObject({ kind: "file-lock", outcome: "error", attempts: 0 });
    expect(events[4]?.error).toBeInstanceOf(StoreUnavailableError);
  });
});

describe("PostgresLocker", () => {
  /** Backend pids of the sessions of pools made with `applicationName`. */
  const backends = async (applicationName: string): Promise<number[]> =>
    (
      await fixture().server.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [
        applicationName,
      ])
    ).map((row) => row.pid);

  /** A locker on its own pool, whose sessions are named `applicationName` (its lock session: by its owner). */
  const namedLocker = (applicationName: string, expiry = 400): PostgresLocker => {
    const pool = fixture().server.pool({ max: 2, application_name: applicationName });
    fixture().pools.push(pool);
    return fixture().locker({ expiry, owner: applicationName }, pool);
  };

  it("each heartbeat is one extend message for the auto-extended leases on the session", async () => {
    const locker = fixture().locker({ expiry: 400 });
    const kept = [uniqueKey("pg-diag"), uniqueKey("pg-diag")];
    const once = uniqueKey("pg-diag");
    const recorder = await recording(async (live) => {
      const leases = await Promise.all(kept.map((key) => locker.acquire(undefined, key)));
      const left = await locker.acquire(undefined, once, { autoExtend: false, expiry: 10_000 });
      await eventually(() => live.extends.some((m) => m.locker === locker), 3000);
      for (const lease of [...leases, left]) expect(await lease.releaseWithOutcome()).toBe("released");
    });
    const [beat] = recorder.extends.filter((m) => m.locker === locker);
    expect(beat).toMatchObject({ kind: "postgres-lock", outcome: "extended", count: 2, error: undefined });
    expect([...(beat?.keys ?? [])].sort()).toEqual([...kept].sort());
    expect(beat?.key).toBe(beat?.keys[0]);
    expect(beat?.elapsedMs).toBeGreaterThanOrEqual(0);
    expect(recorder.lost).toEqual([]);
    expect(recorder.releases.map((m) => [m.kind, m.outcome])).toEqual([
      ["postgres-lock", "released"],
      ["postgres-lock", "released"],
      ["postgres-lock", "released"],
    ]);
  });

  it("pg_terminate_backend: every lease on the session lost (taken, not expected); releases find them expired", async () => {
    const name = `diag-kill-${process.pid}`;
    const locker = namedLocker(name, 10_000);
    const keys = [uniqueKey("pg-diag"), uniqueKey("pg-diag")];
    const recorder = await recording(async () => {
      const leases = await Promise.all(keys.map((key) => locker.acquire(undefined, key)));
      const pids = await backends(name);
      expect(pids).toHaveLength(1);
      await fixture().server.query("SELECT pg_terminate_backend($1)", [pids[0]]);
      await eventually(() => leases.every((lease) => lease.lost.aborted), 5000);
      for (const lease of leases) expect(await lease.releaseWithOutcome()).toBe("expired");
    });
    expect([...recorder.lost].sort((a, b) => a.key.localeCompare(b.key))).toEqual(
      [...keys].sort().map((key) => ({
        key,
        locker,
        kind: "postgres-lock",
        reason: "taken",
        error: expect.any(LockLostError),
        expected: false,
      })),
    );
    expect(recorder.releases.map((m) => [m.kind, m.outcome])).toEqual([
      ["postgres-lock", "expired"],
      ["postgres-lock", "expired"],
    ]);
  });

  it("a frozen backend (SIGSTOP): the heartbeat times out, published as taken with its error, before the loss", async () => {
    const name = `diag-freeze-${process.pid}`;
    const locker = namedLocker(name, 400); // heartbeat every 200 ms, statements time out after 100 ms
    const key = uniqueKey("pg-diag");
    let pid: number | undefined;
    try {
      const recorder = await recording(async (live) => {
        const lease = await locker.acquire(undefined, key);
        await eventually(() => live.extends.some((m) => m.locker === locker && m.outcome === "extended"), 3000);
        [pid] = await backends(name);
        if (pid === undefined) throw new Error("no backend");
        process.kill(pid, "SIGSTOP");
        await eventually(() => lease.lost.aborted, 5000);
      });
      const failed = recorder.extends.filter((m) => m.locker === locker && m.outcome !== "extended");
      expect(failed).toEqual([expect.objectContaining({ key, keys: [key], count: 1, outcome: "taken" })]);
      expect(failed[0]?.error).toBeInstanceOf(Error);
      expect(recorder.lost).toEqual([
        { key, locker, kind: "postgres-lock", reason: "taken", error: expect.any(LockLostError), expected: false },
      ]);
      expect(channelsOf(recorder, ["postgres-lock"]).slice(-2)).toEqual([
        `${EXTEND_CHANNEL} postgres-lock`,
        `${LOST_CHANNEL} postgres-lock`,
      ]);
    } finally {
      if (pid !== undefined) process.kill(pid, "SIGCONT");
    }
  });

  it("autoExtend: false reaching its expiry is an expected loss, in no extend message", async () => {
    const locker = fixture().locker({ expiry: 400 });
    const key = uniqueKey("pg-diag");
    const recorder = await recording(async () => {
      const lease = await locker.acquire(undefined, key, { autoExtend: false, expiry: 250 });
      await eventually(() => lease.lost.aborted, 3000);
      await sleep(250); // a heartbeat or more meanwhile
      expect(await lease.releaseWithOutcome()).toBe("expired");
    });
    expect(recorder.lost).toEqual([
      { key, locker, kind: "postgres-lock", reason: "expired", error: expect.any(LockLostError), expected: true },
    ]);
    expect(recorder.extends.filter((m) => m.keys.includes(key))).toEqual([]);
    expect(recorder.releases).toEqual([expect.objectContaining({ key, locker, outcome: "expired" })]);
  });

  it("an unreachable server: outcome error with the StoreUnavailableError after one attempt", async () => {
    const pool = fixture().server.pool({ port: await freePostgresPort(), connectionTimeoutMillis: 1000 });
    fixture().pools.push(pool);
    const locker = fixture().locker({}, pool);
    const recorder = await recording(async () => {
      await expect(locker.lock(undefined, uniqueKey())).rejects.toBeInstanceOf(StoreUnavailableError);
    });
    const events = recorder.acquiresOf(locker);
    expect(events.map((e) => e.event)).toEqual(["start", "end", "error", "asyncStart", "asyncEnd"]);
    expect(events[4]).toMatchObject({ kind: "postgres-lock", outcome: "error", attempts: 1 });
  });
});

describe("CombinedLocker", () => {
  /** A CombinedLocker over a new MemoryLocker and a new RedisLocker. */
  const combined = (redisExpiry = 30_000): { locker: CombinedLocker; memory: MemoryLocker; redis: RedisLocker } => {
    const memory = keep(new MemoryLocker());
    const redis = keep(new RedisLocker(redisClient(), { expiry: redisExpiry }));
    return { locker: keep(new CombinedLocker([memory, redis])), memory, redis };
  };

  it("one combined-lock call around its members' calls, whose spans are its children", async () => {
    const { locker, memory, redis } = combined();
    const key = uniqueKey("combined-diag");
    const tracing = diagnostics_channel.tracingChannel<unknown, AcquireMessage>(ACQUIRE_CHANNEL);
    const storage = new AsyncLocalStorage<{ kind: LockerKind; parent: LockerKind | undefined }>();
    const spans: Array<{ kind: LockerKind; parent: LockerKind | undefined }> = [];
    tracing.start.bindStore(storage, (message) => {
      const span = { kind: message.kind, parent: storage.getStore()?.kind };
      spans.push(span);
      return span;
    });
    let recorder: Recorder;
    try {
      recorder = await recording(async () => {
        const lease = await locker.acquire(undefined, key);
        expect(await lease.releaseWithOutcome()).toBe("released");
      });
    } finally {
      tracing.start.unbindStore(storage);
    }
    expect(spans).toEqual([
      { kind: "combined-lock", parent: undefined },
      { kind: "memory-lock", parent: "combined-lock" },
      { kind: "redis-lock", parent: "combined-lock" },
    ]);
    const events = recorder.acquires.map((e) => `${e.kind} ${e.event}`);
    expect(events[0]).toBe("combined-lock start");
    expect(events.at(-1)).toBe("combined-lock asyncEnd");
    expect(events.indexOf("redis-lock asyncEnd")).toBeGreaterThan(events.indexOf("memory-lock asyncEnd"));
    expect(events.indexOf("combined-lock asyncStart")).toBeGreaterThan(events.indexOf("redis-lock asyncEnd"));
    expect(recorder.outcomesOf(locker)).toEqual([
      expect.objectContaining({ key, kind: "combined-lock", mode: "acquire", weight: 1, attempts: 1 }),
    ]);
    expect(recorder.outcomesOf(memory)).toHaveLength(1);
    expect(recorder.outcomesOf(redis)).toHaveLength(1);
    // The members' releases, then the combined one.
    expect(recorder.releases.map((m) => [m.kind, m.outcome])).toEqual([
      ["memory-lock", "released"],
      ["redis-lock", "released"],
      ["combined-lock", "released"],
    ]);
    expect(recorder.releases[2]?.locker).toBe(locker);
  });

  it("a member's lock deleted behind it: its extend and lost messages, then the combined loss; the release reports the worst", async () => {
    const { locker, redis } = combined(400);
    const admin = redisClient();
    const key = uniqueKey("combined-diag");
    let lease: Lease | undefined;
    const recorder = await recording(async () => {
      lease = await locker.acquire(undefined, key);
      await admin.del(`globallock:${key}`);
      await eventually(() => lease?.lost.aborted === true, 3000);
      expect(await lease.releaseWithOutcome()).toBe("expired");
    });
    expect(recorder.lost).toEqual([
      { key, locker: redis, kind: "redis-lock", reason: "taken", error: expect.any(LockLostError), expected: false },
      { key, locker, kind: "combined-lock", reason: "taken", error: expect.any(LockLostError), expected: false },
    ]);
    expect(recorder.lost[1]?.error).toBe(lease?.lost.reason);
    expect(recorder.extends.filter((m) => m.kind === "combined-lock")).toEqual([]);
    expect(channelsOf(recorder, ["redis-lock", "combined-lock"]).slice(-5)).toEqual([
      `${EXTEND_CHANNEL} redis-lock`,
      `${LOST_CHANNEL} redis-lock`,
      `${LOST_CHANNEL} combined-lock`,
      "globallock:release redis-lock",
      "globallock:release combined-lock",
    ]);
    expect(recorder.releases.map((m) => [m.kind, m.outcome])).toEqual([
      ["memory-lock", "released"],
      ["redis-lock", "expired"],
      ["combined-lock", "expired"],
    ]);
  });

  it("tryAcquire short of a member: not-acquired; what a member took is given back (its release only)", async () => {
    const { locker, memory, redis } = combined();
    const peer = keep(new RedisLocker(redisClient()));
    const key = uniqueKey("combined-diag");
    const blocker = await peer.acquire(undefined, key);
    const recorder = await recording(async () => {
      expect(await locker.tryAcquire(undefined, key)).toBeUndefined();
    });
    await blocker.release();
    expect(recorder.outcomesOf(locker).map((e) => [e.kind, e.outcome, e.attempts])).toEqual([
      ["combined-lock", "not-acquired", 1],
    ]);
    expect(recorder.outcomesOf(memory).map((e) => e.outcome)).toEqual(["acquired"]);
    expect(recorder.outcomesOf(redis).map((e) => e.outcome)).toEqual(["not-acquired"]);
    expect(recorder.releases).toEqual([expect.objectContaining({ key, locker: memory, outcome: "released" })]);
  });

  it("autoExtend: false reaching its expiry: an expected combined loss", async () => {
    const { locker } = combined();
    const key = uniqueKey("combined-diag");
    const recorder = await recording(async () => {
      const lease = await locker.acquire(undefined, key, { autoExtend: false, expiry: 250 });
      await eventually(() => lease.lost.aborted, 3000);
      await lease.release();
    });
    expect(recorder.lost.filter((m) => m.locker === locker)).toEqual([
      { key, locker, kind: "combined-lock", reason: "expired", error: expect.any(LockLostError), expected: true },
    ]);
    expect(recorder.lost.every((m) => m.expected)).toBe(true);
  });
});

describe("table lockers, ZooKeeper and Memcached", () => {
  it.each(RECORD_KINDS)(
    "%s: a lease's record deleted by hand: its extend message says taken, then the loss (not expected); the release finds it expired",
    async (kind) => {
      const subjects = stores as StoreSubjects;
      const locker = subjects.locker(kind, 400);
      const key = uniqueKey("record-diag");
      const recorder = await recording(async () => {
        const lease = await locker.acquire(undefined, key);
        await subjects.deleteRecord(kind, key);
        await eventually(() => lease.lost.aborted, 5000);
        expect(await lease.releaseWithOutcome()).toBe("expired");
      });
      const failed = recorder.extends.filter((m) => m.locker === locker && m.outcome !== "extended");
      expect(failed).toEqual([expect.objectContaining({ key, keys: [key], count: 1, kind, outcome: "taken" })]);
      expect(recorder.lost).toEqual([
        { key, locker, kind, reason: "taken", error: expect.any(LockLostError), expected: false },
      ]);
      expect(channelsOf(recorder, [kind]).slice(-3)).toEqual([
        `${EXTEND_CHANNEL} ${kind}`,
        `${LOST_CHANNEL} ${kind}`,
        `globallock:release ${kind}`,
      ]);
    },
  );
});

describe("no subscribers", () => {
  it("no grant time is taken while nobody listens (the releases of such grants have no hold time)", async () => {
    const names = [
      ...["start", "end", "asyncStart", "asyncEnd", "error"].map((event) => `tracing:${ACQUIRE_CHANNEL}:${event}`),
      "globallock:release",
      EXTEND_CHANNEL,
      LOST_CHANNEL,
    ];
    expect(names.some((name) => diagnostics_channel.hasSubscribers(name))).toBe(false);
    const lockers: Locker[] = [
      fileLocker({ expiry: 400 }),
      fixture().locker({ expiry: 400 }),
      keep(new CombinedLocker([keep(new MemoryLocker()), keep(new RedisLocker(redisClient(), { expiry: 400 }))])),
    ];
    const grants = await Promise.all(
      lockers.map(
        async (locker) =>
          [
            await locker.lock(undefined, uniqueKey("quiet")),
            await locker.acquire(undefined, uniqueKey("quiet")),
          ] as const,
      ),
    );
    await sleep(300); // leases are extended meanwhile (heartbeats, renames, Redis extensions)
    const late = await recording(async () => {
      for (const [release, lease] of grants) {
        await release();
        await lease.release();
      }
    });
    // Granted while nobody listened: released without a hold time (the combined ones and their members').
    const ours = late.releases.filter((m) => ["file-lock", "postgres-lock", "combined-lock"].includes(m.kind));
    expect(ours.map((m) => m.kind)).toEqual([
      "file-lock",
      "file-lock",
      "postgres-lock",
      "postgres-lock",
      "combined-lock",
      "combined-lock",
    ]);
    expect(late.releases.map((m) => m.heldMs)).toEqual(late.releases.map(() => undefined));
  });
});
