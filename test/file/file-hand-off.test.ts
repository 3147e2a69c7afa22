/**
 * The file store's hand-off and inspect across real processes (children on the built package,
 * see helpers/remote-locker.ts): a lease handed off in a child is adopted here, once; a released
 * lease's handle and foreign or garbage handles are refused; a read lease of a FileReadWriteLocker
 * too; and `inspect` sees another process's holder (its owner, even one too long for a file name,
 * its fencing token) and the read-write queue's waiters.
 */
import { readdirSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileLocker, FileReadWriteLocker, InvalidArgumentError, type Lease, LockLostError } from "../../src/index.js";
import { assertBuilt } from "../helpers/cli.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { RemoteFileLocker } from "../helpers/remote-locker.js";

let directory: string;
const closers: Array<() => Promise<unknown>> = [];

beforeAll(() => {
  assertBuilt();
  directory = tempLockDirectory("hand-off");
});
afterAll(async () => {
  await Promise.allSettled(closers.map((close) => close()));
  rmSync(directory, { recursive: true, force: true });
});

function local(options: { owner?: string; directory?: string } = {}): FileLocker {
  const locker = new FileLocker({ directory, ...options });
  closers.push(() => locker.close());
  return locker;
}

async function child(options: { owner?: string } = {}, view?: "read" | "write"): Promise<RemoteFileLocker> {
  const locker = await RemoteFileLocker.start({ directory, ...options }, undefined, view);
  closers.push(() => locker.stop());
  return locker;
}

/** The reason of the LockLostError `promise` rejects with (here, or reported by a child). */
async function lostReason(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect((error as Error)?.name, String(error)).toBe("LockLostError");
  return error instanceof LockLostError ? error.reason : "(remote)";
}

describe("FileLocker hand-off across processes", () => {
  it("a lease handed off in a child is adopted here (same fencing token, this owner); a second adopt is refused", async () => {
    const [holder, rival] = await Promise.all([child({ owner: "web request" }), child({ owner: "rival" })]);
    const handed = await holder.acquire(undefined, "job", { fencing: true });
    const handle = await handed.handOff();
    expect(handle).toMatch(/^globallock-lease\.v1\./);
    const worker = local({ owner: "queued job" });
    const lease = await worker.adopt(undefined, handle);
    expect(lease.key).toBe("job");
    expect(lease.fencingToken).toBe(handed.fencingToken);
    // Seen from the child's process: held by the adopter now, with the same fencing token.
    const seen = await holder.inspect(undefined, "job");
    expect(seen.holders).toMatchObject([{ owner: "queued job", mode: "exclusive", fencingToken: handed.fencingToken }]);
    // The one entry was renamed: a second adopter (another process, or this one again) finds it taken.
    expect(await lostReason(rival.adopt(undefined, handle))).toBe("taken");
    expect(await lostReason(worker.adopt(undefined, handle))).toBe("taken");
    // The child's own release is a no-op now; the adopter's frees the key.
    expect(await handed.releaseWithOutcome()).toBe("handed-off");
    lease.assertHeld();
    expect(await rival.tryAcquire(undefined, "job")).toBeUndefined();
    expect(await lease.releaseWithOutcome()).toBe("released");
    expect((await worker.inspect(undefined, "job")).holders).toEqual([]);
    expect(await lostReason(worker.adopt(undefined, handle))).toBe("expired");
  });

  it("two processes adopting one handle at once: exactly one wins, 20 times", async () => {
    const [holder, rival] = await Promise.all([child(), child()]);
    const here = local();
    for (let round = 0; round < 20; round++) {
      const key = `race-${round}`;
      const handle = await (await holder.acquire(undefined, key)).handOff();
      const results = await Promise.allSettled([here.adopt(undefined, handle), rival.adopt(undefined, handle)]);
      const won = results.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
      expect(won, key).toHaveLength(1);
      const lost = results.find((result) => result.status === "rejected") as PromiseRejectedResult;
      expect((lost.reason as Error).name).toBe("LockLostError");
      expect(await (won[0] as Lease).releaseWithOutcome()).toBe("released");
    }
  });

  it("the handing process may exit before the adopter comes: the lease is still there to adopt", async () => {
    const holder = await child();
    const handle = await (await holder.acquire(undefined, "exited")).handOff();
    await holder.stop();
    const lease = await local().adopt(undefined, handle);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("a lease handed off by a process that then exits is not taken over as a dead holder's (detached entry)", async () => {
    const holder = await child();
    const handle = await (await holder.acquire(undefined, "detached", { expiry: 30_000 })).handOff();
    await holder.stop();
    const contender = local();
    // Its process is gone, but the handed-off entry names none: only its deadline (30 s) ends it.
    expect(await contender.tryAcquire(undefined, "detached")).toBeUndefined();
    expect(contender.stats.deadHolderTakeovers).toBe(0);
    const lease = await local().adopt(undefined, handle);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("garbage, other directories' and other lockers' handles are InvalidArgumentErrors, before anything is read", async () => {
    const here = local();
    const lease = await here.acquire(undefined, "foreign");
    const handle = await lease.handOff();
    const elsewhere = tempLockDirectory("hand-off-elsewhere");
    const other = local({ directory: elsewhere });
    const rw = new FileReadWriteLocker({ directory });
    closers.push(() => rw.close());
    for (const bad of ["", "nonsense", "globallock-lease.v1.!!!", `${handle}x`.replace("v1.", "v1.x")]) {
      await expect(here.adopt(undefined, bad), bad).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    await expect(other.adopt(undefined, handle)).rejects.toThrow(/same kind and store/);
    await expect(rw.write.adopt(undefined, handle)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(readdirSync(elsewhere)).toEqual([]);
    // The refusals changed nothing: the lease is still adoptable here.
    expect(await (await here.adopt(undefined, handle)).releaseWithOutcome()).toBe("released");
    rmSync(elsewhere, { recursive: true, force: true });
  });
});

describe("inspect across processes", () => {
  it("shows another process's holder: its owner (one too long for a file name too), time left, fencing token", async () => {
    const long = `${"Überwachung ".repeat(19)}end`; // 248 bytes in UTF-8, ~430 characters percent-encoded
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(256);
    const [short, longOwner] = await Promise.all([child({ owner: "cron: nightly report" }), child({ owner: long })]);
    const a = await short.acquire(undefined, "report", { fencing: true, expiry: 10_000 });
    await longOwner.acquire(undefined, "long-owner", { expiry: 10_000 });
    const here = local();
    const info = await here.inspect(undefined, "report");
    expect(info).toMatchObject({ key: "report", waiting: 0 });
    expect(info.holders).toEqual([
      {
        owner: "cron: nightly report",
        mode: "exclusive",
        weight: 1,
        expiresInMs: expect.any(Number),
        fencingToken: a.fencingToken,
      },
    ]);
    const left = info.holders[0]?.expiresInMs as number;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(10_000);
    expect((await here.inspect(undefined, "long-owner")).holders).toMatchObject([{ owner: long }]);
    // The long owner is in a file of its own, written once; every entry name stays within NAME_MAX.
    expect(readdirSync(directory).filter((name) => name.startsWith(".owner-"))).toHaveLength(1);
    for (const name of readdirSync(directory).filter((entry) => entry.endsWith(".lock"))) {
      for (const entry of readdirSync(`${directory}/${name}`))
        expect(Buffer.byteLength(entry)).toBeLessThanOrEqual(255);
    }
  });
});

describe("FileReadWriteLocker hand-off and inspect across processes", () => {
  it("a read lease handed off in a child is adopted here; a writer waiting in another process is counted", async () => {
    const [reader, writer] = await Promise.all([
      child({ owner: "reader" }, "read"),
      child({ owner: "writer" }, "write"),
    ]);
    const rw = new FileReadWriteLocker({ directory, owner: "adopter" });
    closers.push(() => rw.close());
    const handed = await reader.acquire(undefined, "doc");
    const writing = writer.acquire(AbortSignal.timeout(30_000), "doc");
    writing.catch(() => undefined); // awaited below; a failure before that must not be unhandled
    // The writer waits in its process: its ticket is in the directory.
    await expect.poll(async () => (await rw.read.inspect(undefined, "doc")).waiting, { timeout: 10_000 }).toBe(1);
    const handle = await handed.handOff();
    const lease = await rw.read.adopt(undefined, handle);
    const info = await writer.inspect(undefined, "doc");
    expect(info.holders).toMatchObject([{ owner: "adopter", mode: "shared", weight: 1 }]);
    expect(await lostReason(rw.read.adopt(undefined, handle))).toBe("taken");
    expect(await lease.releaseWithOutcome()).toBe("released");
    const written = await writing;
    expect((await rw.write.inspect(undefined, "doc")).holders).toMatchObject([
      { owner: "writer", mode: "exclusive", weight: 1 },
    ]);
    await written.release();
  });
});
