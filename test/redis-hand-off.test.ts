/** The cross-process hand-off queue of a single node: FIFO between lockers, one wake-up per release. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisLocker } from "../src/index.js";
import { uniqueKey } from "./contract.js";
import { RedisFixture } from "./helpers/redis-harness.js";
import { eventually, sleep } from "./helpers/wait.js";

let fixture: RedisFixture;
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
});
afterAll(async () => {
  await fixture?.stop();
});

/** Sum of all `calls=` in INFO commandstats for the given commands. */
async function calls(commands: string[]): Promise<number> {
  const info = await fixture.admin().info("commandstats");
  let total = 0;
  for (const line of info.split("\n")) {
    const match = /^cmdstat_([a-z|]+):calls=(\d+)/.exec(line.trim());
    if (match && commands.includes(match[1] as string)) total += Number(match[2]);
  }
  return total;
}

describe("hand-off queue across lockers (separate connections, as separate processes)", () => {
  it("serves lockers in arrival order", async () => {
    const key = uniqueKey();
    const holder = fixture.locker();
    const lockers = [0, 1, 2, 3].map(() => fixture.locker());
    const release = await holder.lock(undefined, key);
    const order: number[] = [];
    const waits = lockers.map(async (locker, i) => {
      await sleep(i * 30); // arrive one after the other
      const r = await locker.lock(AbortSignal.timeout(10_000), key);
      order.push(i);
      await sleep(5);
      await r();
    });
    await sleep(200);
    await release();
    await Promise.all(waits);
    expect(order).toEqual([0, 1, 2, 3]);
  });

  it("wakes only the next waiter: no failed attempts while many lockers wait", async () => {
    const key = uniqueKey();
    const lockers = Array.from({ length: 6 }, () => fixture.locker());
    const holder = lockers[0] as RedisLocker;
    const release = await holder.lock(undefined, key);
    const done: Promise<void>[] = [];
    for (const locker of lockers.slice(1)) {
      done.push(
        (async () => {
          const r = await locker.lock(AbortSignal.timeout(10_000), key);
          await sleep(2);
          await r();
        })(),
      );
      await sleep(20);
    }
    await sleep(50); // every waiter has tried once and is queued
    const before = await calls(["evalsha", "eval"]);
    await release();
    await Promise.all(done);
    const after = await calls(["evalsha", "eval"]);
    // 5 hand-offs: each one acquire by the named waiter and one release (+1 for the first release).
    expect(after - before).toBe(1 + 5 * 2);
  });

  it("does not let a vanished waiter stall the key: its reservation lapses and it is dropped", async () => {
    const key = uniqueKey();
    const holder = fixture.locker({ backoff: { min: 50, max: 300 } });
    const release = await holder.lock(undefined, key);
    // A locker whose process "dies" while queued: its connection drops without close().
    const doomedClient = fixture.servers[0]?.client();
    if (doomedClient === undefined) throw new Error("no server");
    const doomed = new RedisLocker(doomedClient, { backoff: { min: 50, max: 300 } });
    const doomedWait = doomed.lock(undefined, key).catch(() => undefined);
    await sleep(50);
    const survivor = fixture.locker({ backoff: { min: 50, max: 300 } });
    const survivorWait = survivor.lock(AbortSignal.timeout(10_000), key);
    await sleep(50);
    doomedClient.disconnect(); // the doomed locker can no longer claim a hand-off
    await release(); // reserves the key for the doomed locker, first in line
    const releaseSurvivor = await survivorWait; // after the reservation lapses, at its next poll
    await releaseSurvivor();
    const admin = fixture.admin();
    await eventually(async () => (await admin.keys(`*${key}*`)).length === 0, 5000);
    await doomed.close();
    await doomedWait;
  });
});
