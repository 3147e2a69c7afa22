/**
 * Batched extensions on one Redis node: a batch's keys travel in one argument, separated by NUL
 * bytes (EXTEND_MANY_PACKED), unless one of them holds a NUL byte; that batch goes as declared
 * keys (EXTEND_MANY). Either way every lock stays held, whatever its key is made of.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LockLostError, type ReleaseFunc } from "../../src/index.js";
import { EXTEND_MANY, EXTEND_MANY_PACKED, WAITERS_MARK } from "../../src/redis/scripts.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

let fixture: RedisFixture;
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
});
afterAll(async () => {
  await fixture?.stop();
});

/** Keys of every kind a caller may use (each made unique by `base`). */
function keysOf(base: string): string[] {
  return [`${base}-plain`, `${base} with spaces`, `${base}-ünïcödé-€`, `${base}-${"é".repeat(200)}`];
}

describe("batched extensions on one node", () => {
  it("keep keys with spaces, multibyte characters and NUL bytes held; a batch with a NUL byte goes as declared keys", async () => {
    const lost: LockLostError[] = [];
    const onLockLost = (error: LockLostError): void => {
      lost.push(error);
    };
    // Two lockers, so that each sends its own batches: one with plain keys, one with a NUL byte.
    const packed = fixture.locker({ expiry: 2000, onLockLost });
    const declared = fixture.locker({ expiry: 2000, onLockLost });
    const other = fixture.locker({ expiry: 2000 });
    const base = uniqueKey("batch");
    const packedKeys = keysOf(`${base}-a`);
    const declaredKeys = [...keysOf(`${base}-b`), `${base}-b-nul\0byte`];
    const monitor = await fixture.admin().monitor();
    /** The extension commands seen: which script, and how many keys it declared. */
    const extensions: Array<{ sha: string; numkeys: number }> = [];
    monitor.on("monitor", (_time: string, args: string[]) => {
      const [command, sha, numkeys] = args;
      if (command?.toLowerCase() !== "evalsha") return;
      if (sha === EXTEND_MANY.sha || sha === EXTEND_MANY_PACKED.sha) extensions.push({ sha, numkeys: Number(numkeys) });
    });
    try {
      const releases: ReleaseFunc[] = [];
      for (const [locker, keys] of [
        [packed, packedKeys],
        [declared, declaredKeys],
      ] as const) {
        // At once, so that each locker's locks are due together and extended in one batch.
        for (const [ok, release] of await Promise.all(keys.map((key) => locker.tryLock(undefined, key)))) {
          expect(ok).toBe(true);
          releases.push(release);
        }
      }
      // Past the 2 s lease: every lock needs its extensions (about every second) to be held still.
      await sleep(2600);
      for (const key of [...packedKeys, ...declaredKeys]) expect((await other.tryLock(undefined, key))[0]).toBe(false);
      expect(lost).toEqual([]);
      await eventually(() => extensions.length >= 4);
      // The plain batches went packed (no declared keys), the one with a NUL byte as declared keys.
      expect(extensions).toContainEqual({ sha: EXTEND_MANY_PACKED.sha, numkeys: 0 });
      expect(extensions).toContainEqual({ sha: EXTEND_MANY.sha, numkeys: declaredKeys.length });
      expect(extensions.every(({ sha, numkeys }) => (sha === EXTEND_MANY.sha) === numkeys > 0)).toBe(true);
      for (const release of releases) await release();
      for (const key of [...packedKeys, ...declaredKeys]) expect((await other.tryLock(undefined, key))[0]).toBe(true);
    } finally {
      monitor.disconnect();
    }
  });

  it("answers per lock in a packed batch: a lock whose key holds another token or is gone is lost, the others extended (marked or not)", async () => {
    const locker = fixture.locker({ expiry: 2000 });
    const admin = fixture.admin();
    const keys = keysOf(uniqueKey("batch-answers"));
    const leases = await Promise.all(keys.map((key) => locker.acquire(undefined, key)));
    const [kept, taken, gone, keptToo] = leases as [
      (typeof leases)[0],
      (typeof leases)[0],
      (typeof leases)[0],
      (typeof leases)[0],
    ];
    // Before the first extension (due at about 1 s): one key now holds another token, one is gone,
    // and one carries the waiters' mark (its own token still: extended all the same).
    await admin.set(`globallock:${keys[1]}`, "someone-else");
    await admin.append(`globallock:${keys[3]}`, WAITERS_MARK);
    await admin.del(`globallock:${keys[2]}`);
    for (const lease of [taken, gone]) expect(await whenAborted(lease.lost)).toBeInstanceOf(LockLostError);
    await sleep(300); // the batch that found them was answered for the others too
    for (const [index, lease] of [
      [0, kept],
      [3, keptToo],
    ] as const) {
      lease.assertHeld();
      // Extended: more of its 2 s lease left than a lock taken 1 s ago would have without one.
      expect(await admin.pttl(`globallock:${keys[index]}`)).toBeGreaterThan(1100);
    }
    expect(await admin.get(`globallock:${keys[3]}`)).toMatch(/\+$/);
    for (const lease of leases) await lease.release();
  });
});
