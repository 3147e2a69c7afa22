/**
 * The etcd lockers against real faults of a real 3-member cluster: kill -9 of the leader while
 * locks are held, a holder process SIGSTOPped past its lease (fencing rejects its late write), and
 * the cluster gone (typed errors). The SIGSTOP test runs a child on the BUILT package.
 */
import { type ChildProcess, fork } from "node:child_process";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LockLostError, StoreUnavailableError } from "../../src/index.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { EtcdFixture } from "../helpers/etcd-harness.js";
import { eventually } from "../helpers/wait.js";

/** A fenced store stand-in: accepts a write only from a token at least as high as any it saw. */
class FencedValue {
  highest = -1n;
  write(token: bigint): boolean {
    if (token < this.highest) return false;
    this.highest = token;
    return true;
  }
}

describe("etcd faults (3-member cluster)", () => {
  let fixture: EtcdFixture;

  beforeAll(async () => {
    fixture = await EtcdFixture.start(3);
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  it("kill -9 of the leader while locks are held: no two holders, new locks after the election, tokens keep rising", async () => {
    const lost: LockLostError[] = [];
    const holder = fixture.locker({ onLockLost: (error) => lost.push(error) });
    const other = fixture.locker();
    const keys = [uniqueKey("etcd-failover"), uniqueKey("etcd-failover")];
    const leases = await Promise.all(keys.map((key) => holder.acquire(undefined, key, { fencing: true })));
    const before = leases.map((lease) => lease.fencingToken as bigint);
    const oldLeader = await fixture.cluster.kill();
    // During and after the election the holder keeps both keys: nobody else gets them.
    for (const key of keys) {
      const stolen = await other.tryAcquire(undefined, key).catch((error: unknown) => error);
      expect(stolen === undefined || stolen instanceof StoreUnavailableError).toBe(true);
    }
    const newLeader = await fixture.cluster.waitForLeader();
    expect(newLeader.name).not.toBe(oldLeader.name);
    // New locks work after the election.
    const fresh = await other.acquire(AbortSignal.timeout(10_000), uniqueKey("etcd-failover"), { fencing: true });
    expect(fresh.fencingToken as bigint).toBeGreaterThan(before[1] as bigint);
    for (const key of keys) expect(await other.tryAcquire(undefined, key)).toBeUndefined();
    for (const lease of leases) expect(lease.lost.aborted).toBe(false);
    expect(lost).toEqual([]);
    // The next holder of a key gets a higher token than the one before the failover.
    const waiting = other.acquire(AbortSignal.timeout(10_000), keys[0] as string, { fencing: true });
    expect(await leases[0]?.releaseWithOutcome()).toBe("released");
    const next = await waiting;
    expect(next.fencingToken as bigint).toBeGreaterThan(fresh.fencingToken as bigint);
    await Promise.all([next.release(), fresh.release(), leases[1]?.release()]);
    fixture.cluster.restart(oldLeader);
    await fixture.cluster.waitForLeader();
  });

  it.skipIf(!existsSync("dist/esm/index.js"))(
    "a lease handed off by a child process that then exits is adopted here and outlives the child's etcd lease",
    async () => {
      const key = uniqueKey("etcd-hand-off");
      const expiry = 2000;
      const child: ChildProcess = fork(
        "test/helpers/etcd-holder-child.mjs",
        [JSON.stringify({ endpoints: fixture.cluster.endpoints, key, expiry, handOff: true })],
        { stdio: ["ignore", "ignore", "inherit", "ipc"] },
      );
      const exited = new Promise((resolve) => child.once("exit", resolve));
      const { token, handle } = await new Promise<{ token: string; handle: string }>((resolve) =>
        child.once("message", (message) => resolve(message as never)),
      );
      await exited;
      const adopter = fixture.locker({ expiry, owner: "etcd-adopter" });
      const lease = await adopter.adopt(undefined, handle);
      expect(lease.fencingToken).toBe(BigInt(token));
      // The child's etcd lease runs out (it kept nothing alive): the key now lives on the adopter's.
      await new Promise((resolve) => setTimeout(resolve, expiry + 1500));
      expect(() => lease.assertHeld()).not.toThrow();
      const info = await fixture.locker({ expiry }).inspect(undefined, key);
      expect(info.holders.map((holder) => [holder.owner, holder.fencingToken])).toEqual([
        ["etcd-adopter", BigInt(token)],
      ]);
      await expect(fixture.locker({ expiry }).adopt(undefined, handle)).rejects.toBeInstanceOf(LockLostError);
      expect(await lease.releaseWithOutcome()).toBe("released");
    },
  );

  it.skipIf(!existsSync("dist/esm/index.js"))(
    "a holder SIGSTOPped past its lease loses it; the next holder's token fences its late write out",
    async () => {
      const key = uniqueKey("etcd-stop");
      const expiry = 2000;
      const child: ChildProcess = fork(
        "test/helpers/etcd-holder-child.mjs",
        [JSON.stringify({ endpoints: fixture.cluster.endpoints, key, expiry })],
        { stdio: ["ignore", "ignore", "inherit", "ipc"] },
      );
      try {
        const messages: Array<{ token?: string; lost?: boolean; reason?: string }> = [];
        const next = (): Promise<{ token?: string; lost?: boolean; reason?: string }> =>
          new Promise((resolve) => child.once("message", (message) => resolve(message as never)));
        const held = await next();
        messages.push(held);
        const stale = BigInt(held.token as string);
        const store = new FencedValue();
        expect(store.write(stale)).toBe(true); // the holder wrote while it held the lock
        child.kill("SIGSTOP");
        const taker = fixture.locker({ expiry });
        const lease = await taker.acquire(AbortSignal.timeout(15_000), key, { fencing: true });
        const token = lease.fencingToken as bigint;
        expect(token).toBeGreaterThan(stale);
        expect(store.write(token)).toBe(true);
        const lostMessage = next();
        child.kill("SIGCONT");
        const { lost, reason } = await lostMessage;
        expect(lost).toBe(true);
        expect(reason).toBe("expired");
        // The woken holder's late write carries its old token: refused.
        expect(store.write(stale)).toBe(false);
        await lease.release();
      } finally {
        child.kill("SIGKILL");
      }
    },
  );

  it("inspect reads holders (owner, weight, time left, fencing token); adopt takes a handed-off lease over, keeping its token", async () => {
    const a = fixture.locker({ expiry: 3000, owner: "host-a:1" });
    const b = fixture.locker({ expiry: 3000, owner: "host-b:2" });
    const key = uniqueKey("etcd-adopt");
    const lease = await a.acquire(undefined, key, { fencing: true });
    const view = await b.inspect(undefined, key);
    expect(view.waiting).toBe(0);
    expect(view.holders).toHaveLength(1);
    const [holder] = view.holders;
    expect(holder?.owner).toBe("host-a:1");
    expect(holder?.mode).toBe("exclusive");
    expect(holder?.weight).toBe(1);
    expect(holder?.fencingToken).toBe(lease.fencingToken);
    expect(holder?.expiresInMs).toBeGreaterThan(0);
    expect(holder?.expiresInMs).toBeLessThanOrEqual(3000);
    const handle = await lease.handOff();
    const adopted = await b.adopt(undefined, handle);
    expect(adopted.fencingToken).toBe(lease.fencingToken);
    await expect(a.adopt(undefined, handle)).rejects.toBeInstanceOf(LockLostError);
    expect(await lease.releaseWithOutcome()).toBe("handed-off"); // left alone
    const after = await a.inspect(undefined, key);
    expect(after.holders.map((each) => [each.owner, each.fencingToken])).toEqual([["host-b:2", lease.fencingToken]]);
    expect(await adopted.releaseWithOutcome()).toBe("released");
    await expect(b.adopt(undefined, handle)).rejects.toBeInstanceOf(LockLostError);
    expect((await a.inspect(undefined, key)).holders).toEqual([]);
  });

  it("a release answered 'unknown' while the cluster was down deletes its entry once etcd answers again", async () => {
    const locker = fixture.locker({ expiry: 5000 });
    const other = fixture.locker({ expiry: 5000 });
    const [freed, kept] = [uniqueKey("etcd-unknown"), uniqueKey("etcd-unknown")];
    const lease = await locker.acquire(undefined, freed);
    // Another lock keeps the locker's etcd lease alive: an entry left on it would never run out.
    const keeper = await locker.acquire(undefined, kept);
    // Every member down: the delete cannot reach etcd at all (no member to queue it on).
    const down = [...fixture.cluster.members];
    await Promise.all(down.map((member) => fixture.cluster.kill(member)));
    try {
      expect(await lease.releaseWithOutcome()).toBe("unknown");
    } finally {
      for (const member of down) fixture.cluster.restart(member);
    }
    await fixture.cluster.waitForLeader();
    await eventually(async () => (await other.inspect(undefined, freed)).holders.length === 0, 15_000);
    const next = await other.acquire(AbortSignal.timeout(10_000), freed);
    expect(() => keeper.assertHeld()).not.toThrow();
    await Promise.all([next.release(), keeper.release()]);
  });

  it("the cluster gone: calls reject with a StoreUnavailableError carrying the cause, and held leases are lost", async () => {
    const locker = fixture.locker({ expiry: 2000 });
    const lease = await locker.acquire(undefined, uniqueKey("etcd-gone"));
    await Promise.all(fixture.cluster.members.map((member) => fixture.cluster.kill(member)));
    const error = await locker.tryAcquire(undefined, uniqueKey("etcd-gone")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).cause).toBeDefined();
    const waiting = await locker.lock(AbortSignal.timeout(5000), uniqueKey("etcd-gone")).catch((e: unknown) => e);
    expect(waiting).toBeInstanceOf(StoreUnavailableError);
    expect(((await whenAborted(lease.lost)) as LockLostError).reason).toBe("expired");
    // The core gave the lease up when it was lost: its release resolves at once, and says so.
    expect(await lease.releaseWithOutcome()).toBe("expired");
  });
});
