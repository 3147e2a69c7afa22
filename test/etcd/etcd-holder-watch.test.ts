/**
 * An etcd holder hears its own entry deleted — an admin's `leaseRevoke` of its etcd lease (which
 * deletes every key on it), or the key deleted by hand — as a loss at once, through the watch its
 * key's waiters use, instead of at the next keepalive (half the expiry away). Its own releases are
 * no loss, and the watches it opens are gone after a release, a loss, a hand-off and close, as
 * etcd itself counts them.
 */
import type { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Lease, LockLostError } from "../../src/index.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { EtcdFixture } from "../helpers/etcd-harness.js";
import { eventually } from "../helpers/wait.js";

/** Long enough that a loss found by a keepalive (every half expiry or so) cannot pass for a heard one. */
const EXPIRY = 30_000;

/**
 * Whether `error` was heard from etcd's watch (its cause names the deleted entry), not found by a
 * keepalive (whose cause is the lease gone): the first keepalive of a lock comes somewhat before
 * half its expiry, so the time bound alone could not tell the two apart.
 */
function heard(error: LockLostError | undefined): boolean {
  return error?.cause instanceof Error && error.cause.name === "EntryLostError";
}

describe("etcd: a holder hears its entry deleted", () => {
  let fixture: EtcdFixture;
  let admin: Etcd3;

  beforeAll(async () => {
    fixture = await EtcdFixture.start();
    admin = fixture.client();
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  /** The etcd key and lease of the one holder entry of `key` (under a locker's `prefix`). */
  async function entryOf(key: string, prefix = "globallock:"): Promise<{ key: Buffer; lease: string }> {
    const { kvs } = await admin
      .getAll()
      .prefix(`${prefix}${Buffer.byteLength(key)}:${key}/`)
      .exec();
    expect(kvs).toHaveLength(1);
    const [kv] = kvs;
    return { key: kv?.key as Buffer, lease: kv?.lease as string };
  }

  /** Waits until `count` watches are open on the member, as etcd counts them (its metrics). */
  async function untilWatches(count: number): Promise<void> {
    await eventually(async () => {
      const text = await (await fetch(`${fixture.cluster.endpoints[0]}/metrics`)).text();
      const line = text.split("\n").find((each) => each.startsWith("etcd_debugging_mvcc_watcher_total "));
      return Number(line?.split(" ")[1]) === count;
    }, 20_000);
  }

  /** `lease`'s loss and how long after `since` it came, or undefined when none came within half the expiry. */
  async function lossOf(lease: Lease, since: number): Promise<{ error: LockLostError; afterMs: number } | undefined> {
    const reason = await Promise.race([
      whenAborted(lease.lost),
      whenAborted(AbortSignal.timeout(EXPIRY / 2)).then(() => undefined),
    ]);
    if (reason === undefined) return undefined;
    expect(reason).toBeInstanceOf(LockLostError);
    return { error: reason as LockLostError, afterMs: performance.now() - since };
  }

  it("an admin's leaseRevoke of the holder's etcd lease is a loss ('expired') well before the next keepalive; the key is free for another locker", async () => {
    const hook: LockLostError[] = [];
    const holder = fixture.locker({ expiry: EXPIRY, onLockLost: (error) => hook.push(error) });
    const other = fixture.locker({ expiry: EXPIRY });
    const key = uniqueKey("etcd-revoke");
    const lease = await holder.acquire(undefined, key, { fencing: true });
    const { lease: id } = await entryOf(key);
    const sent = performance.now();
    await admin.leaseClient.leaseRevoke({ ID: id });
    const loss = await lossOf(lease, sent);
    expect(loss?.error.reason).toBe("expired");
    expect(loss?.afterMs).toBeLessThan(EXPIRY / 2);
    expect(heard(loss?.error)).toBe(true);
    expect(hook.map((error) => [error.key, error.reason])).toEqual([[key, "expired"]]);
    // Fencing tokens keep a late write of the old holder out; the key itself is free.
    const next = await other.acquire(undefined, key, { fencing: true });
    expect(next.fencingToken as bigint).toBeGreaterThan(lease.fencingToken as bigint);
    expect(await lease.releaseWithOutcome()).toBe("expired");
    expect(await next.releaseWithOutcome()).toBe("released");
    // The locker goes on, on a new etcd lease.
    const again = await holder.acquire(undefined, uniqueKey("etcd-revoke"));
    expect(await again.releaseWithOutcome()).toBe("released");
  });

  it("a holder's key deleted by hand is a loss ('expired'); its other locks on the same etcd lease stay held", async () => {
    const holder = fixture.locker({ expiry: EXPIRY });
    const [deleted, kept] = [uniqueKey("etcd-deleted"), uniqueKey("etcd-deleted")];
    const lease = await holder.acquire(undefined, deleted);
    const other = await holder.acquire(undefined, kept);
    const entry = await entryOf(deleted);
    expect((await entryOf(kept)).lease).toBe(entry.lease);
    const sent = performance.now();
    await admin.delete().key(entry.key).exec();
    const loss = await lossOf(lease, sent);
    expect(loss?.error.reason).toBe("expired");
    expect(loss?.afterMs).toBeLessThan(EXPIRY / 2);
    expect(heard(loss?.error)).toBe(true);
    expect(other.lost.aborted).toBe(false);
    expect(await lease.releaseWithOutcome()).toBe("expired");
    expect(await other.releaseWithOutcome()).toBe("released");
  });

  it("a release is no loss, though the holders' watch hears its delete; a loss heard later on the same watch comes after it", async () => {
    const hook: LockLostError[] = [];
    // Two permits of one key held by one semaphore share the key's watch: the first release's
    // delete reaches it (it stays open for the second), before the second's delete by hand.
    const semaphore = fixture.semaphore(2, { expiry: EXPIRY, onLockLost: (error) => hook.push(error) });
    const key = uniqueKey("etcd-release");
    await untilWatches(0); // the watches of the tests before are gone
    const released = await semaphore.acquire(undefined, key);
    const deleted = await semaphore.acquire(undefined, key);
    await untilWatches(1);
    expect(await released.releaseWithOutcome()).toBe("released");
    await admin
      .delete()
      .key((await entryOf(key, "globallock:semaphore:")).key)
      .exec();
    expect((await lossOf(deleted, performance.now()))?.error.reason).toBe("expired");
    expect(released.lost.aborted).toBe(false);
    expect(hook).toHaveLength(1);
    await untilWatches(0);
    // A lock, once watched, released: no loss either.
    const locker = fixture.locker({ expiry: EXPIRY, onLockLost: (error) => hook.push(error) });
    const lease = await locker.acquire(undefined, key);
    await untilWatches(1);
    expect(await lease.releaseWithOutcome()).toBe("released");
    await untilWatches(0);
    expect(lease.lost.aborted).toBe(false);
    expect(hook).toHaveLength(1);
  });

  it("leaves no watch open: after a hand-off, an adoption's release and close", async () => {
    await untilWatches(0); // the watches of the tests before are gone
    const holder = fixture.locker({ expiry: EXPIRY });
    const adopter = fixture.locker({ expiry: EXPIRY });
    const lease = await holder.acquire(undefined, uniqueKey("etcd-watches"));
    await untilWatches(1);
    const adopted = await adopter.adopt(undefined, await lease.handOff());
    expect(await adopted.releaseWithOutcome()).toBe("released");
    // The holder's watch went with the hand-off, the adopter's with its release.
    await untilWatches(0);
    expect(lease.lost.aborted).toBe(false);
    // Close cancels the watches of locks it leaves held (to expire with the lease).
    const closing = fixture.locker({ expiry: EXPIRY });
    const held = await Promise.all([
      closing.acquire(undefined, uniqueKey("etcd-watches")),
      closing.acquire(undefined, uniqueKey("etcd-watches")),
    ]);
    await untilWatches(2);
    await closing.close();
    await untilWatches(0);
    for (const each of held) expect(each.lost.aborted).toBe(false);
    // Releases still work after close (the keys would otherwise wait for the lease to run out).
    for (const each of held) expect(await each.releaseWithOutcome()).toBe("released");
  });
});
