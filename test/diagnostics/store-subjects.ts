/**
 * The diagnostics suite's subjects on the stores that share their backend's publishing with the
 * lockers tested store by store in diagnostics-stores.test.ts: the semaphores of files, PostgreSQL
 * and MySQL, the table lockers (PostgreSQL through a PgBouncer in transaction mode with every
 * primitive; MySQL's and SQLite's lock), ZooKeeper (every primitive) and Memcached. A blocker is
 * another locker of the same kind on the same store (a read view's blocker the other view of
 * another read-write locker), as another process would be.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pool as MySqlPool } from "mysql2/promise";
import type { Client as ZooKeeperClient } from "node-zookeeper-client";
import type { Pool } from "pg";
import {
  FileSemaphore,
  type Lease,
  type Locker,
  type LockerKind,
  MySqlSemaphore,
  MySqlTableLocker,
  PostgresSemaphore,
  PostgresTableLocker,
  PostgresTableReadWriteLocker,
  PostgresTableSemaphore,
  type ReadWriteLocker,
  SqliteLocker,
} from "../../src/index.js";
import { PgBouncerServer } from "../../support/pgbouncer-server.mjs";
import type { Subject } from "../contracts/diagnostics-contract.js";
import { MemcachedFixture } from "../helpers/memcached-harness.js";
import type { MySqlFixture } from "../helpers/mysql-harness.js";
import type { PostgresFixture } from "../helpers/postgres-harness.js";
import { ZooKeeperFixture } from "../helpers/zookeeper-harness.js";

/** The semaphores' limit: a blocker and a subject's acquisitions take all of it. */
const LIMIT = 2;

/** A lease long enough that no extension is due while a test runs (ZooKeeper's session is 30 s). */
const EXPIRY = 30_000;

/** Makes one locker of a kind, on the same store each time. */
type Make = () => Locker;

/** A subject whose blocker is another locker of the same kind holding all of the key. */
function exclusive(kind: LockerKind, weight: number, make: Make): Subject {
  return {
    kind,
    weight,
    setup: () => {
      const peer = make();
      return { locker: make(), block: (key): Promise<Lease> => peer.acquire(undefined, key, { weight }) };
    },
  };
}

/** The two subjects of a read-write kind: each view, blocked by the other view of another locker. */
function views(store: ReadWriteStore, make: () => ReadWriteLocker): Subject[] {
  return [
    {
      kind: `${store}-read`,
      weight: 1,
      setup: () => {
        const peer = make();
        return { locker: make().read, block: (key) => peer.write.acquire(undefined, key) };
      },
    },
    {
      kind: `${store}-write`,
      weight: 1,
      setup: () => {
        const peer = make();
        return { locker: make().write, block: (key) => peer.read.acquire(undefined, key) };
      },
    },
  ];
}

/** The servers and files of these subjects, beside the PostgreSQL and MariaDB servers the file started. */
export class StoreSubjects {
  readonly #closables: Array<{ close(): Promise<void> }> = [];
  /** The pool every PostgreSQL table locker shares (so they hear each other's releases). */
  readonly #pooled: Pool;
  /** The pool every MySQL table locker shares. */
  readonly #mysqlPool: MySqlPool;
  #rawZooKeeper: ZooKeeperClient | undefined;

  private constructor(
    readonly pooler: PgBouncerServer,
    readonly zookeeper: ZooKeeperFixture,
    readonly memcached: MemcachedFixture,
    readonly directory: string,
    readonly postgres: PostgresFixture,
    readonly mysql: MySqlFixture,
  ) {
    this.#pooled = pooler.pool({ max: 8 });
    this.#mysqlPool = mysql.pool(8);
  }

  /**
   * Starts ZooKeeper and Memcached at once, and a transaction pooler in front of PostgreSQL once
   * `postgres` has started; makes a temporary directory for the file semaphores and the SQLite
   * database. What started is stopped when something fails (`postgres` and `mysql` are the
   * caller's to stop).
   */
  static async start(postgres: Promise<PostgresFixture>, mysql: Promise<MySqlFixture>): Promise<StoreSubjects> {
    const started = await Promise.allSettled([
      postgres.then((fixture) => PgBouncerServer.start(fixture.server, { poolMode: "transaction", poolSize: 4 })),
      ZooKeeperFixture.start(),
      MemcachedFixture.start(),
      postgres,
      mysql,
    ] as const);
    const [pooler, zookeeper, memcached, postgresStarted, mysqlStarted] = started;
    if (
      pooler.status === "fulfilled" &&
      zookeeper.status === "fulfilled" &&
      memcached.status === "fulfilled" &&
      postgresStarted.status === "fulfilled" &&
      mysqlStarted.status === "fulfilled"
    ) {
      const directory = mkdtempSync(join(tmpdir(), "globallock-diagnostics-stores-"));
      return new StoreSubjects(
        pooler.value,
        zookeeper.value,
        memcached.value,
        directory,
        postgresStarted.value,
        mysqlStarted.value,
      );
    }
    await Promise.allSettled([
      pooler.status === "fulfilled" ? pooler.value.stop() : undefined,
      zookeeper.status === "fulfilled" ? zookeeper.value.stop() : undefined,
      memcached.status === "fulfilled" ? memcached.value.stop() : undefined,
    ]);
    throw started.find((outcome) => outcome.status === "rejected")?.reason;
  }

  #keep<T extends { close(): Promise<void> }>(made: T): T {
    this.#closables.push(made);
    return made;
  }

  /**
   * A new locker of `kind` (a read-write kind's store gives a read-write locker: see
   * {@link readWrite}), with leases of `expiry` ms for the kinds of {@link RECORD_KINDS}.
   */
  locker(kind: ExclusiveKind, expiry = EXPIRY): Locker {
    const directory = this.directory;
    switch (kind) {
      case "file-semaphore":
        return this.#keep(new FileSemaphore({ directory, limit: LIMIT }));
      case "postgres-semaphore":
        return this.#keep(new PostgresSemaphore(this.postgres.pool(), { limit: LIMIT }));
      case "mysql-semaphore":
        return this.#keep(new MySqlSemaphore(this.mysql.pool(), { limit: LIMIT }));
      case "postgres-table-lock":
        return this.#keep(new PostgresTableLocker(this.#pooled, { expiry }));
      case "postgres-table-semaphore":
        return this.#keep(new PostgresTableSemaphore(this.#pooled, { limit: LIMIT }));
      case "mysql-table-lock":
        return this.#keep(new MySqlTableLocker(this.#mysqlPool));
      case "sqlite-lock":
        return this.#keep(new SqliteLocker(join(directory, "locks.db")));
      case "zookeeper-lock":
        return this.zookeeper.locker({ expiry });
      case "zookeeper-semaphore":
        return this.zookeeper.semaphore(LIMIT, { expiry: EXPIRY });
      case "memcached-lock":
        return this.memcached.locker({ expiry });
    }
  }

  /** A new read-write locker of `store`. */
  readWrite(store: ReadWriteStore): ReadWriteLocker {
    return store === "zookeeper"
      ? this.zookeeper.readWrite({ expiry: EXPIRY })
      : this.#keep(new PostgresTableReadWriteLocker(this.#pooled));
  }

  /** Deletes by hand what holds `key` for a lock of `kind` (default prefix): its row, node or item. */
  async deleteRecord(kind: RecordKind, key: string): Promise<void> {
    if (kind === "postgres-table-lock") {
      await this.#pooled.query("DELETE FROM globallock_leases WHERE name = $1", [`globallock:${key}`]);
    } else if (kind === "memcached-lock") {
      await this.memcached.server.command(`delete globallock:${key}`);
    } else {
      const client = this.#zookeeperClient();
      const parent = `/globallock/${key}`;
      const children = await new Promise<string[]>((resolve, reject) =>
        client.getChildren(parent, (error, found) => (error ? reject(error) : resolve(found))),
      );
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve, reject) =>
              client.remove(`${parent}/${child}`, (error) => (error ? reject(error) : resolve())),
            ),
        ),
      );
    }
  }

  /** A client of the ZooKeeper server for looking at and deleting nodes (closed by the fixture). */
  #zookeeperClient(): ZooKeeperClient {
    this.#rawZooKeeper ??= this.zookeeper.client();
    return this.#rawZooKeeper;
  }

  /** Closes the lockers made here, stops the servers started here, removes the directory. */
  async stop(): Promise<void> {
    await Promise.allSettled(this.#closables.map((closable) => closable.close()));
    await this.#pooled.end().catch(() => undefined);
    await Promise.allSettled([this.pooler.stop(), this.zookeeper.stop(), this.memcached.stop()]);
    rmSync(this.directory, { recursive: true, force: true });
  }
}

/** The kinds whose subject's blocker is another locker of the kind. */
const EXCLUSIVE = {
  "file-semaphore": LIMIT,
  "postgres-semaphore": LIMIT,
  "mysql-semaphore": LIMIT,
  "postgres-table-lock": 1,
  "postgres-table-semaphore": LIMIT,
  "mysql-table-lock": 1,
  "sqlite-lock": 1,
  "zookeeper-lock": 1,
  "zookeeper-semaphore": LIMIT,
  "memcached-lock": 1,
} as const satisfies Partial<Record<LockerKind, number>>;

/** The kinds whose lease's record (a row, a node, an item) {@link StoreSubjects.deleteRecord} deletes. */
export const RECORD_KINDS = ["postgres-table-lock", "zookeeper-lock", "memcached-lock"] as const;

/** A kind of {@link RECORD_KINDS}. */
export type RecordKind = (typeof RECORD_KINDS)[number];

/** A kind of {@link EXCLUSIVE}. */
type ExclusiveKind = keyof typeof EXCLUSIVE;

/** The stores whose read-write views are subjects. */
type ReadWriteStore = "postgres-table" | "zookeeper";

/** The subjects, on the stores `stores()` gives once the file's servers run. */
export function storeSubjects(stores: () => StoreSubjects): Subject[] {
  return [
    ...Object.entries(EXCLUSIVE).map(([kind, weight]) =>
      exclusive(kind as ExclusiveKind, weight, () => stores().locker(kind as ExclusiveKind)),
    ),
    ...(["postgres-table", "zookeeper"] as const).flatMap((store) => views(store, () => stores().readWrite(store))),
  ];
}
