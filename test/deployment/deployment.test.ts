/**
 * checkDeployment against real stores set up the ways that can break a lock: a Redis that may
 * evict lock keys, keeps nothing on disk, refuses scripts, replicates or is a replica; PostgreSQL
 * behind a transaction or statement pooler, read-only by default, or a standby in recovery; a
 * read-only MariaDB or a shared connection (the table lockers' verdicts on the same setups
 * included); a per-user lock directory; a single-member etcd. Each setup gives its finding, and a
 * setup without the fault does not. (SQLite's: sqlite-deployment.test.ts.)
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import type { Pool } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { networkFileSystem } from "../../src/deployment/files.js";
import {
  CombinedLocker,
  checkDeployment,
  FileLocker,
  FileReadWriteLocker,
  type Finding,
  InvalidArgumentError,
  type Locker,
  MemoryLocker,
  MySqlLocker,
  MySqlTableLocker,
  MySqlTableReadWriteLocker,
  MySqlTableSemaphore,
  PostgresLocker,
  PostgresTableLocker,
  PostgresTableReadWriteLocker,
  PostgresTableSemaphore,
  RedisLocker,
  RedisSemaphore,
} from "../../src/index.js";
import type { MySqlPool, MySqlPoolConnection } from "../../src/mysql/types.js";
import { PgBouncerServer } from "../../support/pgbouncer-server.mjs";
import { PostgresServer } from "../../support/postgres-server.mjs";
import { runCli } from "../helpers/cli.js";
import { EtcdFixture } from "../helpers/etcd-harness.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually } from "../helpers/wait.js";

const codes = (found: readonly Finding[]): string[] => found.map((item) => `${item.level}:${item.code}`).sort();
const closables: Array<{ close(): Promise<void> }> = [];
const keep = <T extends { close(): Promise<void> }>(locker: T): T => {
  closables.push(locker);
  return locker;
};
afterAll(async () => {
  await Promise.allSettled(closables.map((locker) => locker.close()));
});

describe("checkDeployment: Redis", () => {
  let servers: RedisServer[] = [];
  const clients: Redis[] = [];
  const client = (server: RedisServer, options?: object): Redis => {
    const made =
      options === undefined ? server.client() : new Redis({ host: "127.0.0.1", port: server.port, ...options });
    clients.push(made);
    return made;
  };

  beforeAll(async () => {
    servers = await startServers(2);
  });
  afterAll(async () => {
    for (const made of clients) made.disconnect();
    await stopServers(servers);
  });

  it("a test server as started (no persistence, noeviction) reports no persistence, and nothing else", async () => {
    const found = await checkDeployment(keep(new RedisLocker(client(servers[0] as RedisServer))));
    expect(codes(found)).toEqual(["warning:redis-no-persistence"]);
    expect(found[0]?.fix).toMatch(/appendonly yes/);
  });

  it("an eviction policy that can drop lock keys: allkeys-* is an error, volatile-* a warning; appendonly quiets persistence", async () => {
    const admin = client(servers[1] as RedisServer);
    await admin.config("SET", "appendonly", "yes");
    try {
      await admin.config("SET", "maxmemory-policy", "allkeys-lru");
      expect(codes(await checkDeployment(keep(new RedisSemaphore(admin, { limit: 2 }))))).toEqual([
        "error:redis-eviction-policy",
      ]);
      await admin.config("SET", "maxmemory-policy", "volatile-ttl");
      expect(codes(await checkDeployment(keep(new RedisLocker(admin))))).toEqual(["warning:redis-eviction-policy"]);
    } finally {
      await admin.config("SET", "maxmemory-policy", "noeviction");
      await admin.config("SET", "appendonly", "no");
    }
  });

  it("a user whose ACL refuses scripting: an error naming it (and CONFIG unreadable is said, not thrown)", async () => {
    const admin = client(servers[0] as RedisServer);
    await admin.call("ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting", "-config");
    const limited = new Redis({
      host: "127.0.0.1",
      port: (servers[0] as RedisServer).port,
      username: "noscripts",
      password: "pw",
    });
    const locker = new RedisLocker(limited);
    try {
      const found = await checkDeployment(locker);
      expect(codes(found)).toEqual(["error:redis-scripting-refused", "info:redis-config-unreadable"]);
      expect(found.find((item) => item.code === "redis-scripting-refused")?.fix).toMatch(/\+@scripting/);
    } finally {
      await locker.close();
      limited.disconnect();
      await admin.call("ACL", "DELUSER", "noscripts");
    }
  });

  it("replication: the master warns that a failover can lose a lock; a locker on the replica is an error", async () => {
    const [replica] = await startServers(1, {
      args: ["--replicaof", "127.0.0.1", String((servers[0] as RedisServer).port)],
    });
    try {
      const master = client(servers[0] as RedisServer);
      await eventually(async () => /connected_slaves:1/.test(await master.info("replication")), 10_000);
      expect(codes(await checkDeployment(keep(new RedisLocker(master))))).toContain("warning:redis-replication");
      expect(codes(await checkDeployment(keep(new RedisLocker(client(replica as RedisServer)))))).toContain(
        "error:redis-replica",
      );
    } finally {
      await stopServers([replica as RedisServer]);
    }
  });

  it("globallock doctor prints the findings with their fixes; its exit status is 1 for warnings, 2 for errors", async () => {
    const url = `redis://127.0.0.1:${(servers[1] as RedisServer).port}`;
    const warned = await runCli(["doctor", "--redis", url]);
    expect(warned.code).toBe(1);
    expect(warned.stdout).toMatch(/WARNING redis-no-persistence: .*\n {4}fix: appendonly yes/);
    const admin = client(servers[1] as RedisServer);
    await admin.config("SET", "maxmemory-policy", "allkeys-lru");
    try {
      const failed = await runCli(["doctor", "--json", "--redis", url]);
      expect(failed.code).toBe(2);
      const report = JSON.parse(failed.stdout) as { findings: Finding[] };
      expect(codes(report.findings)).toEqual(["error:redis-eviction-policy", "warning:redis-no-persistence"]);
    } finally {
      await admin.config("SET", "maxmemory-policy", "noeviction");
    }
    const usage = await runCli(["doctor", "--key", "k"]);
    expect([usage.code, usage.stderr]).toEqual([64, expect.stringMatching(/drop --key/)]);
  });

  it("a quorum names the node of each finding", async () => {
    const found = await checkDeployment(
      keep(
        new RedisLocker([
          client(servers[0] as RedisServer),
          client(servers[1] as RedisServer),
          client(servers[0] as RedisServer),
        ]),
      ),
    );
    expect(
      found
        .filter((item) => item.code === "redis-no-persistence")
        .map((item) => item.message.match(/node \d of 3/)?.[0]),
    ).toEqual(["node 1 of 3", "node 2 of 3", "node 3 of 3"]);
  });
});

describe("checkDeployment: PostgreSQL", () => {
  let server: PostgresServer;
  let readOnly: PostgresServer;
  let transaction: PgBouncerServer;
  let session: PgBouncerServer;
  let statement: PgBouncerServer;
  const pools: Pool[] = [];
  const pool = (source: { pool(options?: object): Pool }): Pool => {
    const made = source.pool({ max: 4 });
    pools.push(made);
    return made;
  };

  beforeAll(async () => {
    [server, readOnly] = await Promise.all([
      PostgresServer.start(),
      PostgresServer.start({ args: ["-c", "default_transaction_read_only=on"] }),
    ]);
    [transaction, session, statement] = await Promise.all([
      PgBouncerServer.start(server, { poolMode: "transaction", poolSize: 2 }),
      PgBouncerServer.start(server, { poolMode: "session", poolSize: 4 }),
      PgBouncerServer.start(server, { poolMode: "statement", poolSize: 2 }),
    ]);
  });
  afterAll(async () => {
    await Promise.allSettled(pools.map((made) => made.end()));
    await Promise.allSettled([transaction?.stop(), session?.stop(), statement?.stop()]);
    await Promise.allSettled([server?.stop(), readOnly?.stop()]);
  });

  it("a direct connection and a session pooler: nothing to report", async () => {
    expect(await checkDeployment(keep(new PostgresLocker(pool(server))))).toEqual([]);
    expect(await checkDeployment(keep(new PostgresLocker(pool(session))))).toEqual([]);
  });

  it("a transaction pooler is an error naming the way out", async () => {
    const found = await checkDeployment(keep(new PostgresLocker(pool(transaction))));
    expect(codes(found)).toEqual(["error:postgres-transaction-pooler"]);
    expect(found[0]?.fix).toMatch(/pool_mode = session/);
  });

  it("read-only transactions by default: a warning (fenced locks cannot draw tokens)", async () => {
    expect(codes(await checkDeployment(keep(new PostgresLocker(pool(readOnly)))))).toEqual([
      "warning:postgres-read-only",
    ]);
  });

  it("table lockers: a direct connection, a session pooler and a transaction pooler report nothing (nothing of theirs outlives a transaction)", async () => {
    expect(await checkDeployment(keep(new PostgresTableLocker(pool(server))))).toEqual([]);
    expect(await checkDeployment(keep(new PostgresTableLocker(pool(session))))).toEqual([]);
    const pooled = pool(transaction);
    expect(await checkDeployment(keep(new PostgresTableLocker(pooled)))).toEqual([]);
    expect(await checkDeployment(keep(new PostgresTableSemaphore(pooled, { limit: 2 })))).toEqual([]);
    const rw = keep(new PostgresTableReadWriteLocker(pooled));
    expect(await checkDeployment(rw.read)).toEqual([]);
  });

  it("table lockers: a statement pooler and read-only transactions by default are errors (every attempt would fail)", async () => {
    const found = await checkDeployment(keep(new PostgresTableLocker(pool(statement))));
    expect(codes(found)).toEqual(["error:postgres-statement-pooler"]);
    expect(found[0]?.fix).toMatch(/transaction-mode/);
    expect(codes(await checkDeployment(keep(new PostgresTableSemaphore(pool(readOnly), { limit: 2 }))))).toEqual([
      "error:postgres-read-only",
    ]);
  });

  it("a standby in recovery is an error for both kinds of locker (the read-only server, restarted as a standby)", async () => {
    // No primary to follow: it stays in recovery, open for reads. (The last test of the server.)
    writeFileSync(join(readOnly.dataDir, "standby.signal"), "");
    await readOnly.restart();
    const found = await checkDeployment(keep(new PostgresLocker(pool(readOnly))));
    expect(codes(found)).toEqual(["error:postgres-read-only"]);
    expect(found[0]?.message).toMatch(/standby in recovery: its advisory locks/);
    const onStandby = await checkDeployment(keep(new PostgresTableReadWriteLocker(pool(readOnly))).write);
    expect(codes(onStandby)).toEqual(["error:postgres-read-only"]);
    expect(onStandby[0]?.message).toMatch(/standby in recovery: the lease table cannot be written/);
  });
});

describe("checkDeployment: MySQL", () => {
  let fixture: MySqlFixture;

  beforeAll(async () => {
    fixture = await MySqlFixture.start();
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  it("a primary: nothing; read_only = ON: an error", async () => {
    expect(await checkDeployment(keep(new MySqlLocker(fixture.pool())))).toEqual([]);
    await fixture.server.query("SET GLOBAL read_only = ON");
    try {
      expect(codes(await checkDeployment(keep(new MySqlLocker(fixture.pool()))))).toEqual(["error:mysql-read-only"]);
    } finally {
      await fixture.server.query("SET GLOBAL read_only = OFF");
    }
  });

  it("two pool connections on one server connection (as a multiplexing proxy hands them out): an error, but not for a table locker", async () => {
    const shared = await fixture.pool(1).getConnection();
    try {
      const proxy: MySqlPool = {
        getConnection: async (): Promise<MySqlPoolConnection> => ({
          query: (sql: string, values?: unknown) => shared.query(sql, values as never) as Promise<[unknown, unknown]>,
          release: () => undefined,
          destroy: () => undefined,
          connection: shared.connection,
        }),
      };
      expect(codes(await checkDeployment(keep(new MySqlLocker(proxy))))).toEqual(["error:mysql-multiplexing-proxy"]);
      expect(await checkDeployment(keep(new MySqlTableLocker(proxy)))).toEqual([]);
    } finally {
      shared.release();
    }
  });

  it("table lockers: a primary reports nothing; read_only = ON is an error (a replica's rows are not the primary's)", async () => {
    expect(await checkDeployment(keep(new MySqlTableLocker(fixture.pool())))).toEqual([]);
    await fixture.server.query("SET GLOBAL read_only = ON");
    try {
      expect(codes(await checkDeployment(keep(new MySqlTableSemaphore(fixture.pool(), { limit: 2 }))))).toEqual([
        "error:mysql-read-only",
      ]);
      const rw = keep(new MySqlTableReadWriteLocker(fixture.pool()));
      expect(codes(await checkDeployment(rw.read))).toEqual(["error:mysql-read-only"]);
    } finally {
      await fixture.server.query("SET GLOBAL read_only = OFF");
    }
  });
});

describe("checkDeployment: files, etcd, memory, combined", () => {
  let directory: string;
  let etcd: EtcdFixture;

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), "globallock-doctor-"));
    etcd = await EtcdFixture.start();
  });
  afterAll(async () => {
    await etcd?.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  it("globallock doctor on a lock directory: an info finding only is exit 0", async () => {
    chmodSync(directory, 0o700);
    const result = await runCli(["doctor", "--dir", directory]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/INFO file-directory-per-user/);
  });

  it("a lock directory of its owner alone is said (info); a shared one is not", async () => {
    chmodSync(directory, 0o700);
    expect(codes(await checkDeployment(keep(new FileLocker({ directory }))))).toEqual(["info:file-directory-per-user"]);
    chmodSync(directory, 0o2775);
    const rw = keep(new FileReadWriteLocker({ directory }));
    expect(await checkDeployment(rw.read)).toEqual([]);
  });

  it("network file systems are named by their statfs type (none can be mounted here)", () => {
    expect(networkFileSystem(0x6969)).toBe("NFS");
    expect(networkFileSystem(0xff534d42)).toBe("CIFS");
    expect(networkFileSystem(0x01021994)).toBeUndefined(); // tmpfs
    expect(networkFileSystem(0xef53)).toBeUndefined(); // ext4
  });

  it("a single-member etcd is a warning", async () => {
    expect(codes(await checkDeployment(etcd.locker()))).toEqual(["warning:etcd-single-member"]);
  });

  it("memory is said to be one process's; a combined locker reports its members' findings, each named", async () => {
    const memory = keep(new MemoryLocker());
    expect(codes(await checkDeployment(memory))).toEqual(["info:memory-one-process"]);
    chmodSync(directory, 0o700);
    const combined = keep(new CombinedLocker([keep(new MemoryLocker()), keep(new FileLocker({ directory }))]));
    const found = await checkDeployment(combined);
    expect(codes(found)).toEqual(["info:file-directory-per-user", "info:memory-one-process"]);
    expect(found.map((item) => item.message.slice(0, 11))).toEqual(["member 1 of", "member 2 of"]);
  });

  it("something else is said, not thrown; bad input and an aborted signal reject", async () => {
    const stranger = { lock: () => undefined } as unknown as Locker;
    expect(codes(await checkDeployment(stranger))).toEqual(["info:unknown-locker"]);
    await expect(checkDeployment(null as unknown as Locker)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(checkDeployment(keep(new MemoryLocker()), {} as AbortSignal)).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    const reason = new Error("stop");
    await expect(checkDeployment(keep(new MemoryLocker()), AbortSignal.abort(reason))).rejects.toBe(reason);
  });
});
