/**
 * The Memcached locker against real faults of a real server: its item deleted by hand, flush_all,
 * a restart (empty), a server that stops answering, and a holder process SIGKILLed. The SIGKILL
 * test runs the locker in a child process, bundled from the sources.
 */
import { type ChildProcess, fork } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Locker, LockLostError, StoreUnavailableError } from "../../src/index.js";
import { MEMCACHED_CLIENT_OPTIONS } from "../../src/memcached/client-options.js";
import { uniqueKey, whenAborted } from "../contracts/contract.js";
import { bundledLocker, MemcachedFixture } from "../helpers/memcached-harness.js";
import { eventually, sleep } from "../helpers/wait.js";

/** A lease of one second: Memcached keeps its item 1 to 3 s past the holder's last write. */
const EXPIRY = 1000;

/**
 * `attempt`, again after 50 ms while it rejects with a StoreUnavailableError: for the moments
 * after a restart when the client refuses commands (the server it saw fail is skipped for 1 s).
 */
async function answered<T>(attempt: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      await sleep(50);
    }
  }
}

/** Whether `locker` can take `key` now (released at once if so), once the store answers. */
function takes(locker: Locker, key: string): Promise<boolean> {
  return answered(async () => {
    const [ok, release] = await locker.tryLock(undefined, key);
    await release();
    return ok;
  });
}

describe("Memcached faults", () => {
  let fixture: MemcachedFixture;

  beforeAll(async () => {
    fixture = await MemcachedFixture.start();
  });
  afterAll(async () => {
    await fixture?.stop();
  });

  it("an item deleted by hand: its holder's lost says taken at the next extension", async () => {
    const key = uniqueKey("mc-deleted");
    const lease = await fixture.locker({ expiry: EXPIRY }).acquire(undefined, key);
    expect(await fixture.server.command(`delete globallock:${key}`)).toBe("DELETED\r\n");
    const reason = await whenAborted(lease.lost);
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("taken");
    expect(await lease.releaseWithOutcome()).not.toBe("released");
  });

  it("flush_all: the holder is told at its next extension, and nobody gets the key while it may still believe", async () => {
    const key = uniqueKey("mc-flush");
    const holder = fixture.locker({ expiry: EXPIRY });
    const other = fixture.locker({ expiry: EXPIRY });
    const lease = await holder.acquire(undefined, key);
    expect(await fixture.server.command("flush_all")).toBe("OK\r\n");
    // The server is empty, but the first lock stored there finds the prefix's epoch gone: it is
    // deleted again, and the prefix grants nothing for a lease.
    expect(await takes(other, key)).toBe(false);
    expect(((await whenAborted(lease.lost)) as LockLostError).reason).toBe("taken");
    const release = await other.lock(AbortSignal.timeout(15_000), key);
    expect(() => lease.assertHeld()).toThrow(LockLostError);
    await release();
  });

  it("a restart: the holder's lease is lost, and the key waits out a lease before anyone else holds it", async () => {
    const key = uniqueKey("mc-restart");
    const holder = fixture.locker({ expiry: EXPIRY });
    const other = fixture.locker({ expiry: EXPIRY });
    const lease = await holder.acquire(undefined, key);
    await fixture.server.restart();
    // Empty now; the holder still believes until its next extension says otherwise.
    expect(await takes(other, key)).toBe(false);
    const reason = await whenAborted(lease.lost);
    expect(reason).toBeInstanceOf(LockLostError);
    expect(["taken", "expired"]).toContain((reason as LockLostError).reason);
    const release = await answered(() => other.lock(AbortSignal.timeout(15_000), key));
    expect(lease.lost.aborted).toBe(true);
    expect(() => lease.assertHeld()).toThrow(LockLostError);
    await release();
  });

  it("a server that stops answering: commands fail after operationTimeout; a lock stored late is deleted again", async () => {
    const key = uniqueKey("mc-paused");
    // A long lease: the late item would outlive the test if nobody deleted it.
    const locker = fixture.locker({ expiry: 60_000, operationTimeout: 300 });
    fixture.server.pause();
    try {
      await expect(locker.tryLock(undefined, key)).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      fixture.server.resume();
    }
    // The add is answered once the server runs again: it stored the lock, which nobody holds.
    await eventually(async () => (await answered(() => locker.inspect(undefined, key))).holders.length === 0, 10_000);
    expect(await takes(locker, key)).toBe(true);
  });

  it("a SIGKILLed holder process: the key is free after its lease, not before", async () => {
    const key = uniqueKey("mc-sigkill");
    const bundle = await bundledLocker();
    let child: ChildProcess | undefined;
    try {
      child = fork(
        "test/helpers/memcached-holder-child.mjs",
        [
          JSON.stringify({
            location: fixture.server.location,
            clientOptions: MEMCACHED_CLIENT_OPTIONS,
            key,
            expiry: EXPIRY,
            module: bundle.path,
          }),
        ],
        { stdio: ["ignore", "ignore", "inherit", "ipc"] },
      );
      const exited = new Promise((resolve) => child?.once("exit", resolve));
      const { before } = await new Promise<{ before: number }>((resolve) =>
        child?.once("message", (message) => resolve(message as { before: number })),
      );
      child.kill("SIGKILL");
      await exited;
      const taker = fixture.locker({ expiry: EXPIRY });
      const release = await taker.lock(AbortSignal.timeout(15_000), key);
      // Its item outlived the lease the child asked for (from before it asked: an extension only
      // pushes that later), whatever the child managed before it died.
      expect(Date.now()).toBeGreaterThanOrEqual(before + EXPIRY);
      await release();
    } finally {
      child?.kill("SIGKILL");
      bundle.remove();
    }
  });
});
