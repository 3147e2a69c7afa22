/**
 * EtcdLocker's waiters queue as entries in the key's directory (etcd's own lock recipe), so they
 * are served in arrival order across lockers: a release lets exactly the next one in, and a
 * newcomer cannot take the key ahead of the queue.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uniqueKey } from "../contracts/contract.js";
import { EtcdFixture } from "../helpers/etcd-harness.js";
import { eventually } from "../helpers/wait.js";

describe("EtcdLocker: waiters in arrival order across lockers", () => {
  let fixture: EtcdFixture;

  beforeAll(async () => {
    fixture = await EtcdFixture.start();
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  it("hands the key to the waiters in the order they queued, and a newcomer's tryLock right after a release does not overtake them", async () => {
    const [holder, first, second, newcomer] = [fixture.locker(), fixture.locker(), fixture.locker(), fixture.locker()];
    const key = uniqueKey("etcd-queue");
    const releaseHolder = await holder.lock(undefined, key);
    const order: string[] = [];
    const firstWaits = first.lock(AbortSignal.timeout(10_000), key).then((release) => {
      order.push("first");
      return release;
    });
    // Each waiter's entry is in etcd, where any locker's inspect counts it, before the next one
    // asks: arrival order is the order of the entries.
    await eventually(async () => (await holder.inspect(undefined, key)).waiting === 1);
    const secondWaits = second.lock(AbortSignal.timeout(10_000), key).then((release) => {
      order.push("second");
      return release;
    });
    // Should an assertion fail, the waiters' rejections at close are not unhandled.
    for (const waiting of [firstWaits, secondWaits]) waiting.catch(() => undefined);
    await eventually(async () => (await holder.inspect(undefined, key)).waiting === 2);
    await releaseHolder();
    // The release let the first waiter in before anyone could ask: the newcomer finds it taken.
    expect((await newcomer.tryLock(undefined, key))[0]).toBe(false);
    const releaseFirst = await firstWaits;
    expect(order).toEqual(["first"]);
    expect((await newcomer.tryLock(undefined, key))[0]).toBe(false);
    await releaseFirst();
    const releaseSecond = await secondWaits;
    expect(order).toEqual(["first", "second"]);
    await releaseSecond();
    const [free, releaseFree] = await newcomer.tryLock(undefined, key);
    expect(free).toBe(true);
    await releaseFree();
  });
});
