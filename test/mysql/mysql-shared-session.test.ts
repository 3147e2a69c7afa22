/**
 * MySqlLocker where its connection is shared, as a proxy that multiplexes connections would share
 * it (no such proxy is packaged here: the lockers are handed one real connection, or a connection
 * whose statements start landing on another real one). A GET_LOCK lock belongs to the server
 * connection, so a shared one must be refused, never used by two holders, never cleaned up by
 * wholesale.
 */
import type { PoolConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LockLostError, MySqlLocker, UnsupportedError } from "../../src/index.js";
import { lockName } from "../../src/mysql/keys.js";
import type { MySqlPool, MySqlPoolConnection } from "../../src/mysql/types.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";

/**
 * A pool that hands every checkout the same facade: its statements go to `route()`'s connection
 * at the time they are sent (a multiplexing proxy's choice), and it is never given back or closed.
 */
function proxyPool(route: () => PoolConnection): MySqlPool {
  const facade: MySqlPoolConnection = {
    query: (sql: string, values?: unknown) =>
      route().query(sql, values as Parameters<PoolConnection["query"]>[1]) as Promise<[unknown, unknown]>,
    release: () => undefined,
    destroy: () => undefined,
    get connection() {
      return route().connection;
    },
  };
  return { getConnection: async () => facade };
}

function expectRefusal(error: unknown): void {
  expect(error).toBeInstanceOf(UnsupportedError);
  expect((error as Error).message).toMatch(/MySQL GET_LOCK locks need a session of their own/);
  expect((error as Error).message).toMatch(/multiplex/);
  expect((error as Error).message).toMatch(/directly/);
}

describe("MySqlLocker on a shared connection", () => {
  let fixture: MySqlFixture;
  const connections: PoolConnection[] = [];

  beforeAll(async () => {
    fixture = await MySqlFixture.start();
  });
  afterAll(async () => {
    for (const connection of connections) connection.destroy();
    await fixture?.stop();
  });

  /** The server's id of `connection`. */
  const idOf = async (connection: PoolConnection): Promise<number | undefined> =>
    ((await connection.query("SELECT CONNECTION_ID() AS id"))[0] as Array<{ id: number }>)[0]?.id;
  const connect = async (): Promise<PoolConnection> => {
    const connection = await fixture.pool(1).getConnection();
    connections.push(connection);
    return connection;
  };
  const holderOf = async (key: string): Promise<number | null> =>
    (
      await fixture.server.query<{ id: number | null }>("SELECT IS_USED_LOCK(?) AS id", [lockName(`globallock:${key}`)])
    )[0]?.id ?? null;

  it("a second locker handed the connection that holds the first one's lock refuses, and leaves that lock alone", async () => {
    const shared = await connect();
    const pool = proxyPool(() => shared);
    const first = new MySqlLocker(pool);
    const second = new MySqlLocker(pool);
    const key = uniqueKey("my-shared");
    const lease = await first.acquire(undefined, key);
    const id = await idOf(shared);
    expectRefusal(await second.tryAcquire(undefined, key).catch((error: unknown) => error));
    expectRefusal(await second.tryAcquire(undefined, uniqueKey("my-shared")).catch((error: unknown) => error));
    await second.close();
    expect(await holderOf(key)).toBe(id);
    lease.assertHeld();
    expect(await lease.releaseWithOutcome()).toBe("released");
    await first.close();
  });

  it("a held lease whose statements start landing on another connection is lost (expired), and the locker refuses", async () => {
    const [one, two] = [await connect(), await connect()];
    let current = one;
    const locker = new MySqlLocker(
      proxyPool(() => current),
      { expiry: 2000 },
    );
    const key = uniqueKey("my-moved");
    const lease = await locker.acquire(undefined, key);
    const id = await idOf(one);
    current = two;
    const reason = (await whenAborted(lease.lost)) as LockLostError;
    expect(reason.reason).toBe("expired");
    expect(reason.cause).toBeInstanceOf(UnsupportedError);
    expect(await lease.releaseWithOutcome()).toBe("expired");
    expectRefusal(await locker.tryAcquire(undefined, uniqueKey("my-moved")).catch((error: unknown) => error));
    // Nothing was taken or released on the other connection: the lock stays where it was taken.
    expect(await holderOf(key)).toBe(id);
    await locker.close();
  });
});
