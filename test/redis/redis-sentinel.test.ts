/**
 * A Sentinel-managed failover with real processes: a master, a replica and three Sentinels; the
 * locker talks to the master through ioredis's Sentinel support. The master is SIGKILLed; the
 * Sentinels promote the replica. A lock whose key had reached the replica is kept; a lock acquired
 * after the last replicated write is reported lost (never silently kept); the locker keeps
 * working on the new master, and fencing tokens keep rising there.
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LockLostError, RedisLocker } from "../../src/index.js";
import { type SentinelGroup, startSentinelGroup } from "../../support/redis-server.mjs";
import { uniqueKey } from "../contracts/contract.js";
import { eventually } from "../helpers/wait.js";

let group: SentinelGroup;
const lockers: RedisLocker[] = [];
const clients: Redis[] = [];
beforeAll(async () => {
  group = await startSentinelGroup();
}, 30_000);
afterAll(async () => {
  await Promise.allSettled(lockers.map((locker) => locker.close()));
  for (const client of clients) client.disconnect();
  await group?.stop();
});

function sentinelLocker(onLockLost?: (error: LockLostError) => void): RedisLocker {
  const client = group.client();
  clients.push(client);
  // A lease that outlasts a failover on a loaded machine (seen: longer than 6 s), so that only
  // the unreplicated lock is lost; its extensions come every 7.5 s.
  const locker = new RedisLocker(client, { expiry: 15_000, ...(onLockLost ? { onLockLost } : {}) });
  lockers.push(locker);
  return locker;
}

describe("a Sentinel failover", () => {
  it("keeps replicated locks, reports unreplicated ones lost, keeps working, and fencing tokens keep rising", async () => {
    const lost: LockLostError[] = [];
    const locker = sentinelLocker((error) => lost.push(error));
    const other = sentinelLocker();
    const master = group.master.client();
    clients.push(master);

    // A lock whose key has reached the replica (WAIT confirms it).
    const keptKey = uniqueKey("replicated");
    const kept = await locker.acquire(undefined, keptKey, { fencing: true });
    expect(await master.wait(1, 2000)).toBe(1);

    // A lock acquired after the last write the replica will ever see: the replica is frozen and
    // its replication link cut, so nothing written from now on reaches it.
    group.replica.pause();
    await master.call("CLIENT", "KILL", "TYPE", "replica");
    const lostKey = uniqueKey("unreplicated");
    const unreplicated = await locker.acquire(undefined, lostKey, { fencing: true });
    await group.master.kill();
    group.replica.resume();

    const failover = await group.waitForFailover({ timeoutMs: 30_000 });
    expect(failover.port).toBe(group.replica.port);

    // Reported lost at its next extension on the new master: its key is not there.
    await eventually(() => unreplicated.lost.aborted, 20_000);
    expect(lost.map((error) => [error.key, error.reason])).toEqual([[lostKey, "taken"]]);

    // The replicated lock is extended on the new master and stays exclusive.
    const extensionsBefore = locker.leaseStats.extensions;
    await eventually(() => locker.leaseStats.extensions > extensionsBefore, 20_000);
    expect(kept.lost.aborted).toBe(false);
    expect(() => kept.assertHeld()).not.toThrow();
    expect((await other.tryLock(undefined, keptKey))[0]).toBe(false);

    // The locker works on the new master: the lost key is free, and fencing tokens keep rising.
    const next = await other.acquire(AbortSignal.timeout(10_000), lostKey, { fencing: true });
    expect(next.fencingToken).toBeGreaterThan(unreplicated.fencingToken ?? 0n);
    expect(next.fencingToken).toBeGreaterThan(kept.fencingToken ?? 0n);
    expect(await next.releaseWithOutcome()).toBe("released");
    expect(await kept.releaseWithOutcome()).toBe("released");
    expect(await unreplicated.releaseWithOutcome()).toBe("expired");
  }, 60_000);
});
