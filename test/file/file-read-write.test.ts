/**
 * FileReadWriteLocker: the read-write contract (peers: other lockers on the same directory), the
 * lock contract on its write view, and what its files look like.
 */
import { readdirSync, rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { FileReadWriteLocker } from "../../src/index.js";
import { lockerContract } from "../contracts/contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { fileReadWriteHarness, tempLockDirectory } from "../helpers/file-harness.js";

readWriteContract("FileReadWriteLocker (peer: another locker on the same directory)", fileReadWriteHarness());

lockerContract("FileReadWriteLocker write view", async () => {
  const harness = await fileReadWriteHarness()();
  return {
    create: async (options) => (await harness.create(options)).write,
    peer: async (_locker, options) => (await harness.peer(undefined as never, options)).write,
    fencing: true,
    handOff: true,
    cleanup: () => harness.cleanup(),
  };
});

describe("FileReadWriteLocker specifics", () => {
  const directories: string[] = [];
  afterAll(() => {
    for (const directory of directories) rmSync(directory, { recursive: true, force: true });
  });

  it("readers and a writer leave nothing behind but the fencing counter", async () => {
    const directory = tempLockDirectory("rw-files");
    directories.push(directory);
    const rw = new FileReadWriteLocker({ directory });
    const readers = await Promise.all([rw.read.acquire(undefined, "k"), rw.read.acquire(undefined, "k")]);
    expect(rw.heldCount).toBe(2);
    const writer = rw.write.acquire(AbortSignal.timeout(5000), "k", { fencing: true });
    await Promise.all(readers.map((lease) => lease.release()));
    const lease = await writer;
    expect(lease.fencingToken).toBe(1n);
    await lease.release();
    await rw.close();
    expect(readdirSync(directory).filter((name) => !name.endsWith(".fence"))).toEqual([]);
  });

  it("a reader whose process died is taken over by a writer at once", async () => {
    const directory = tempLockDirectory("rw-dead");
    directories.push(directory);
    const { mkdirSync } = await import("node:fs");
    const { join } = await import("node:path");
    const rw = new FileReadWriteLocker({ directory });
    // A reader entry of a process that is gone: this one's entry, with another pid and start time.
    const reader = await rw.read.acquire(undefined, "k");
    const [stem] = readdirSync(directory).filter((name) => name.endsWith(".rd"));
    const [entry] = readdirSync(join(directory, stem as string));
    const fields = (entry as string).split(".");
    fields[0] = "f".repeat(32);
    fields[4] = "999999999";
    mkdirSync(join(directory, stem as string, fields.join(".")));
    await reader.release();
    const writer = await rw.write.acquire(AbortSignal.timeout(2000), "k");
    expect(rw.stats.deadHolderTakeovers).toBe(1);
    await writer.release();
    await rw.close();
  });
});
