/**
 * What the core makes of a store's answers (DESIGN.md rules 2 and 6; core/lock-core.ts), on the
 * scripted store: a store error is that error, never a hang or a `false`; a grant that came too
 * late is a miss, asked again; a key held here is not asked for; fencing tokens are passed
 * through; a release is idempotent, never rejects, and never touches a later holder's books.
 */
import { describe, expect, it } from "vitest";
import { LockLostError, StoreUnavailableError } from "../../src/errors.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { untilWaiting } from "../helpers/wait.js";
import { rejection, useBed } from "./bed.js";

const bed = useBed();

/** A store failure as a backend reports one. */
const storeDown = (key: string): StoreUnavailableError =>
  new StoreUnavailableError(`fake:${key}`, "The fake store is down", { cause: new Error("ECONNREFUSED") });

describe("core: store answers", () => {
  it("a store error during a lock's attempt rejects that call with the error; the next waiter gets its turn", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("store-error");
    const failure = storeDown(key);
    store.failNext("acquire", failure);
    const first = locker.lock(undefined, key);
    const second = locker.lock(undefined, key);
    expect(await rejection(first)).toBe(failure);
    const release = await second; // woken by the first leaving, not by a poll (60 s)
    expect(locker.heldCount).toBe(1);
    await release();
    expect([locker.heldCount, locker.waitingCount, store.watcher.total]).toEqual([0, 0, 0]);
  });

  it("a store error on a retry after waiting rejects the waiting call too (never a hang)", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("store-error-waiting");
    store.occupy(key);
    const waiting = locker.lock(undefined, key);
    await untilWaiting(locker, 1);
    const failure = storeDown(key);
    store.failNext("acquire", failure);
    store.emitReleased(key);
    expect(await rejection(waiting)).toBe(failure);
    expect([locker.waitingCount, store.watcher.total]).toEqual([0, 0]);
  });

  it("tryLock and tryAcquire reject with a store error: it never reads as false", async () => {
    const locker = bed.locker();
    const key = uniqueKey("try-error");
    const failure = storeDown(key);
    locker.store.failNext("acquire", failure, 2);
    expect(await rejection(locker.tryLock(undefined, key))).toBe(failure);
    expect(await rejection(locker.tryAcquire(undefined, key))).toBe(failure);
    expect(locker.heldCount).toBe(0);
  });

  it("a grant that expired on arrival is a miss: lock waits and tries again", async () => {
    const locker = bed.locker({ backoffMin: 5, backoffMax: 20 });
    const { store } = locker;
    const key = uniqueKey("expired-on-arrival");
    store.script.acquire.push("expired-on-arrival", "expired-on-arrival");
    const release = await locker.lock(undefined, key);
    expect(store.callsOf("acquire", key)).toHaveLength(3);
    expect(store.callsOf("release", key)).toHaveLength(0);
    await release();
  });

  it("tryLock asks again a few times after a grant that expired on arrival, then answers false", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const [late, never] = [uniqueKey("late-answer"), uniqueKey("never-in-time")];
    store.script.acquire.push("expired-on-arrival", "expired-on-arrival", "expired-on-arrival");
    const [acquired, release] = await locker.tryLock(undefined, late);
    expect(acquired).toBe(true);
    expect(store.callsOf("acquire", late)).toHaveLength(4);
    await release();
    store.script.acquire.push(...Array.from({ length: 4 }, () => "expired-on-arrival" as const));
    expect((await locker.tryLock(undefined, never))[0]).toBe(false);
    expect(store.callsOf("acquire", never)).toHaveLength(4);
  });

  it("tryLock of a key held here answers false without asking; held elsewhere, after one attempt", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const [here, elsewhere] = [uniqueKey("held-here"), uniqueKey("held-elsewhere")];
    const release = await locker.lock(undefined, here);
    expect((await locker.tryLock(undefined, here))[0]).toBe(false);
    expect(store.callsOf("acquire", here)).toHaveLength(1);
    store.occupy(elsewhere);
    expect((await locker.tryLock(undefined, elsewhere))[0]).toBe(false);
    expect(store.callsOf("acquire", elsewhere)).toHaveLength(1);
    expect([locker.waitingCount, store.watcher.total]).toEqual([0, 0]);
    await release();
  });

  it("passes the store's fencing tokens through to each lease", async () => {
    const locker = bed.locker();
    const key = uniqueKey("fencing");
    const first = await locker.acquire(undefined, key, { fencing: true });
    await first.release();
    const second = await locker.acquire(undefined, key, { fencing: true });
    expect([first.fencingToken, second.fencingToken]).toEqual(locker.store.fencingTokens);
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken as bigint);
    const plain = await locker.acquire(undefined, uniqueKey("unfenced"));
    expect(plain.fencingToken).toBeUndefined();
    await Promise.all([second.release(), plain.release()]);
  });
});

describe("core: release", () => {
  it("is idempotent: concurrent and repeated calls send one release and agree on its outcome", async () => {
    const locker = bed.locker();
    const key = uniqueKey("idempotent");
    const lease = await locker.acquire(undefined, key);
    const calls = [lease.release(), lease.release(), lease.releaseWithOutcome()];
    const [, , outcome] = await Promise.all(calls);
    expect(outcome).toBe("released");
    await lease.release();
    expect(await lease.releaseWithOutcome()).toBe("released");
    expect(locker.store.callsOf("release", key)).toHaveLength(1);
    expect(locker.heldCount).toBe(0);
  });

  it("never rejects, even when the backend's release throws (it reports unknown)", async () => {
    const locker = bed.locker();
    const key = uniqueKey("release-throws");
    locker.store.failNext("release", new Error("a backend that breaks its promise"));
    const lease = await locker.acquire(undefined, key);
    await expect(lease.release()).resolves.toBeUndefined();
    expect(await lease.releaseWithOutcome()).toBe("unknown");
    expect(locker.heldCount).toBe(0);
    expect(locker.store.callsOf("release", key)).toHaveLength(1);
  });

  it("a stale release of a lost lease never touches the later holder's books", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("stale-release");
    const lost = await locker.acquire(undefined, key);
    const lostToken = store.holderOf(key) as string;
    store.emitLost([lostToken], "expired");
    const reason = await whenAborted(lost.lost);
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("expired");
    const current = await locker.acquire(undefined, key);
    // The store found another token on the key: the release deleted nothing.
    expect(await lost.releaseWithOutcome()).toBe("taken");
    // The later lease is still held, here and in the store: a key held here is not even asked for.
    expect(locker.heldCount).toBe(1);
    expect(store.holderOf(key)).not.toBe(lostToken);
    expect(store.holderOf(key)).toBeDefined();
    const attempts = store.callsOf("acquire", key).length;
    expect((await locker.tryLock(undefined, key))[0]).toBe(false);
    expect(store.callsOf("acquire", key)).toHaveLength(attempts);
    expect(() => current.assertHeld()).not.toThrow();
    await current.release();
  });

  it("the late release of a lease left to expire neither reports it again nor unbooks the later holder", async () => {
    const locker = bed.locker();
    const { store } = locker;
    const key = uniqueKey("expired-then-released");
    const expired = await locker.acquire(undefined, key, { expiry: 50, autoExtend: false });
    await whenAborted(expired.lost);
    const current = await locker.acquire(undefined, key);
    // Past its deadline, another token on the key: what it found is that it had expired.
    expect(await expired.releaseWithOutcome()).toBe("expired");
    expect(locker.heldCount).toBe(1);
    const attempts = store.callsOf("acquire", key).length;
    expect((await locker.tryLock(undefined, key))[0]).toBe(false);
    expect(store.callsOf("acquire", key)).toHaveLength(attempts);
    await current.release();
  });
});
