/**
 * `list` on the file store, against the real file system: held keys named from the lock
 * directory with their holders (a holder in a child process, the lister here), prefix and limit,
 * waiters, released keys gone, a SIGKILLed holder's entry left out as `inspect` leaves it out;
 * locks, read-write keys and semaphores of one directory kept apart; long and odd keys (a key
 * file); entries without a key (written before keys were recorded) skipped; and an entry with a
 * key read by the earlier format's reader with every field but the owner as before.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashKey } from "../../src/file/directory.js";
import { entryOf } from "../../src/file/entry.js";
import { readWriteLockKey } from "../../src/file/file-backend.js";
import { FileSemaphore, type FileSemaphoreOptions } from "../../src/file/file-semaphore.js";
import { HOST } from "../../src/file/host.js";
import { keyFileName } from "../../src/file/key-field.js";
import { semaphoreKey } from "../../src/file/semaphore-backend.js";
import { FileLocker, type FileLockerOptions, FileReadWriteLocker } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { bundleChild, RemoteLocker } from "../helpers/remote-locker.js";
import { eventually } from "../helpers/wait.js";

const LOCKER_CHILD = new URL("./locker-child.ts", import.meta.url).pathname;
const SEMAPHORE_CHILD = new URL("./semaphore-child.ts", import.meta.url).pathname;

/** The entry name of the format before keys were recorded, as its reader parsed it. */
const EARLIER_ENTRY =
  /^([0-9a-f]{32})\.(\d{1,16})\.(\d{1,16})\.(\d{1,16})\.(\d{1,10})\.(\d{1,20})\.(\d{1,20})\.([0-9a-f]{32}|0)\.(\d{1,20})\.([^.]*)\.(.+)$/;

describe("FileLocker.list: the lock directory names its held keys", () => {
  let directory: string;
  let lockerBundle: Awaited<ReturnType<typeof bundleChild>>;
  let semaphoreBundle: Awaited<ReturnType<typeof bundleChild>>;
  const closables: Array<{ close(): Promise<void> }> = [];
  const children: RemoteLocker[] = [];
  const keep = <T extends { close(): Promise<void> }>(locker: T): T => {
    closables.push(locker);
    return locker;
  };
  const child = async (options: FileLockerOptions = {}): Promise<RemoteLocker> => {
    const remote = await RemoteLocker.ofBundle(lockerBundle.path, { directory, ...options });
    children.push(remote);
    return remote;
  };
  beforeAll(async () => {
    directory = tempLockDirectory("list");
    [lockerBundle, semaphoreBundle] = await Promise.all([bundleChild(LOCKER_CHILD), bundleChild(SEMAPHORE_CHILD)]);
  });
  afterAll(async () => {
    await Promise.all([...closables.map((c) => c.close()), ...children.map((c) => c.stop())]);
    lockerBundle?.remove();
    semaphoreBundle?.remove();
    rmSync(directory, { recursive: true, force: true });
  });

  it("names the keys another process holds, with their holders; prefix and limit; released keys are gone", async () => {
    const holder = await child({ owner: "list-child" });
    const base = `${uniqueKey("list")}/`;
    // A long key (too long for an entry's name: a key file), dots and percent signs, a lone
    // surrogate (no percent-encoding: a key file), a NUL and a non-BMP character.
    const keys = [
      `${base}a`,
      `${base}b.c%2E`,
      `${base}${"long-".repeat(60)}end`,
      `${base}odd\ud800`,
      `${base}nul\u0000🔒`,
    ];
    const leases = await Promise.all(keys.map((key) => holder.acquire(undefined, key, { fencing: true })));
    const lister = keep(new FileLocker({ directory }));
    // Two keys are named by key files, written beside their first take, not on its path: waited for.
    let listed: Awaited<ReturnType<FileLocker["list"]>> = [];
    await eventually(async () => {
      listed = await lister.list(undefined, { prefix: base });
      return listed.length === keys.length;
    });
    expect(listed.map((info) => info.key)).toEqual([...keys].sort());
    for (const info of listed) {
      expect(info.waiting).toBe(0);
      expect(info.holders).toHaveLength(1);
      expect(info.holders[0]).toMatchObject({ owner: "list-child", mode: "exclusive", weight: 1 });
      expect(info.holders[0]?.expiresInMs).toBeGreaterThan(0);
      expect(info.holders[0]?.fencingToken).toBe(1n);
      // As inspect tells it (but for the time left, which runs on).
      const [inspected] = (await lister.inspect(undefined, info.key)).holders;
      expect(inspected).toMatchObject({ ...info.holders[0], expiresInMs: expect.any(Number) });
    }
    // The long key and the one with a lone surrogate are in key files, whatever the key holds.
    for (const key of [keys[2], keys[3]] as string[]) {
      expect(JSON.parse(readFileSync(join(directory, keyFileName(hashKey(key))), "utf8"))).toBe(key);
    }
    expect((await lister.list(undefined, { prefix: `${base}b` })).map((info) => info.key)).toEqual([keys[1]]);
    expect(await lister.list(undefined, { prefix: `${base}zz` })).toEqual([]);
    const limited = await lister.list(undefined, { prefix: base, limit: 2 });
    expect(limited).toHaveLength(2);
    for (const info of limited) expect(keys).toContain(info.key);
    await leases[0]?.release();
    expect((await lister.list(undefined, { prefix: base })).map((info) => info.key)).toEqual(keys.slice(1).sort());
    await Promise.all(leases.map((lease) => lease.release()));
    expect(await lister.list(undefined, { prefix: base })).toEqual([]);
  });

  it("counts the waiters of every process", async () => {
    const holder = await child();
    const key = uniqueKey("list-wait");
    const lease = await holder.acquire(undefined, key);
    const waiters = [keep(new FileLocker({ directory })), await child()];
    const stop = new AbortController();
    const waiting = waiters.map((waiter) => waiter.lock(stop.signal, key).catch((error: unknown) => error));
    const lister = keep(new FileLocker({ directory }));
    await eventually(async () => (await lister.list(undefined, { prefix: key }))[0]?.waiting === 2, 20_000);
    stop.abort(new Error("done"));
    await Promise.all(waiting);
    await lease.release();
    expect(await lister.list(undefined, { prefix: key })).toEqual([]);
  });

  it("names a key handed off to another locker, with the adopter's owner (which leaves the key less room)", async () => {
    const key = uniqueKey("list-handed");
    const giver = keep(new FileLocker({ directory, owner: "giver" }));
    const taker = keep(new FileLocker({ directory, owner: "t".repeat(70) }));
    const handle = await (await giver.acquire(undefined, key)).handOff();
    const lister = keep(new FileLocker({ directory }));
    expect((await lister.list(undefined, { prefix: key }))[0]?.holders.map((holder) => holder.owner)).toEqual([
      "giver",
    ]);
    const adopted = await taker.adopt(undefined, handle);
    // The adopter's long owner leaves the key no room in the entry's name: its key file, written
    // beside this first take and not on its path, names it from when it is written (waited for).
    let info: Awaited<ReturnType<FileLocker["list"]>>[number] | undefined;
    await eventually(async () => {
      [info] = await lister.list(undefined, { prefix: key });
      return info !== undefined;
    });
    expect(info?.key).toBe(key);
    expect(info?.holders.map((holder) => holder.owner)).toEqual(["t".repeat(70)]);
    await adopted.release();
    expect(await lister.list(undefined, { prefix: key })).toEqual([]);
  });

  it("leaves out a SIGKILLed holder's entry, as inspect does, though its files are still there", async () => {
    const holder = await child();
    const key = uniqueKey("list-killed");
    await holder.acquire(undefined, key);
    const lister = keep(new FileLocker({ directory }));
    expect((await lister.list(undefined, { prefix: key })).map((info) => info.key)).toEqual([key]);
    await holder.kill();
    expect(readdirSync(join(directory, `${hashKey(key)}.lock`))).toHaveLength(1);
    expect((await lister.inspect(undefined, key)).holders).toEqual([]);
    expect(await lister.list(undefined, { prefix: key })).toEqual([]);
  });

  it("keeps a directory's locks, read-write keys and semaphores apart, each listed by its own kind", async () => {
    const key = uniqueKey("list-kinds");
    const lock = keep(new FileLocker({ directory }));
    const readWrite = keep(new FileReadWriteLocker({ directory }));
    const semaphoreHolder = await RemoteLocker.ofBundle(semaphoreBundle.path, {
      directory,
      limit: 3,
    } satisfies FileSemaphoreOptions);
    children.push(semaphoreHolder);
    const release = await lock.lock(undefined, key);
    const readers = [await readWrite.read.acquire(undefined, key), await readWrite.read.acquire(undefined, key)];
    const permit = await semaphoreHolder.acquire(undefined, key, { weight: 2 });

    const lister = keep(new FileLocker({ directory }));
    const [asLock] = await lister.list(undefined, { prefix: key });
    expect(asLock?.holders.map((holder) => [holder.mode, holder.weight])).toEqual([["exclusive", 1]]);
    const rwLister = keep(new FileReadWriteLocker({ directory }));
    for (const view of [rwLister.read, rwLister.write]) {
      const [asReadWrite] = await view.list(undefined, { prefix: key });
      expect(asReadWrite?.key).toBe(key);
      expect(asReadWrite?.holders.map((holder) => holder.mode)).toEqual(["shared", "shared"]);
    }
    const semaphoreLister = keep(new FileSemaphore({ directory, limit: 3 }));
    const [asSemaphore] = await semaphoreLister.list(undefined, { prefix: key });
    expect(asSemaphore?.holders.map((holder) => [holder.mode, holder.weight])).toEqual([["shared", 2]]);

    await Promise.all(readers.map((reader) => reader.release()));
    const writer = await readWrite.write.acquire(undefined, key);
    const [written] = await rwLister.read.list(undefined, { prefix: key });
    expect(written?.holders.map((holder) => [holder.mode, holder.weight])).toEqual([["exclusive", 1]]);
    // A read-write key's writer holds a lock directory too: never listed as a lock's key.
    expect((await lister.list(undefined, { prefix: key })).map((info) => info.holders.length)).toEqual([1]);
    await Promise.all([writer.release(), permit.release(), release()]);
    for (const one of [lister, rwLister.write, semaphoreLister]) {
      expect(await one.list(undefined, { prefix: key })).toEqual([]);
    }
    // Three kinds, three hashes: the files of one key name never meet.
    const hashes = [hashKey(key), hashKey(readWriteLockKey(key)), hashKey(semaphoreKey(key))];
    expect(new Set(hashes).size).toBe(3);
  });

  it("reads past many keys (more than one batch of names), stopping at the limit", async () => {
    const holder = keep(new FileLocker({ directory }));
    const base = `${uniqueKey("list-many")}/`;
    const keys = Array.from({ length: 300 }, (_, index) => `${base}${"x".repeat(index % 5)}${index}`);
    const releases = await Promise.all(keys.map((key) => holder.lock(undefined, key)));
    const lister = keep(new FileLocker({ directory }));
    expect((await lister.list(undefined, { prefix: base })).map((info) => info.key)).toEqual([...keys].sort());
    expect(await lister.list(undefined, { prefix: base, limit: 10 })).toHaveLength(10);
    expect((await lister.list(undefined, { prefix: `${base}xxxx` })).length).toBe(
      keys.filter((key) => key.startsWith(`${base}xxxx`)).length,
    );
    await Promise.all(releases.map((release) => release()));
    expect(await lister.list(undefined, { prefix: base })).toEqual([]);
  });

  it("skips an entry that records no key (an earlier version's); inspect still shows it", async () => {
    const key = uniqueKey("list-earlier");
    const lock = join(directory, `${hashKey(key)}.lock`);
    // An entry as the earlier format wrote it: no key after the owner.
    const earlier = entryOf("e".repeat(32), 60_000, Date.now(), "earlier-owner");
    expect(earlier.name).not.toContain("%~");
    mkdirSync(join(lock, earlier.name), { recursive: true });
    const lister = keep(new FileLocker({ directory }));
    expect(await lister.list(undefined, { prefix: key })).toEqual([]);
    expect((await lister.inspect(undefined, key)).holders.map((holder) => holder.owner)).toEqual(["earlier-owner"]);
    rmSync(lock, { recursive: true, force: true });
  });

  it("never trusts a key that does not hash to its files (a key file changed by hand)", async () => {
    const holder = keep(new FileLocker({ directory }));
    const key = `${uniqueKey("list-forged")}/${"y".repeat(300)}`;
    const release = await holder.lock(undefined, key);
    const keyFile = join(directory, keyFileName(hashKey(key)));
    await eventually(() => readdirSync(directory).includes(keyFileName(hashKey(key))));
    const lister = keep(new FileLocker({ directory }));
    expect((await lister.list(undefined, { prefix: key })).map((info) => info.key)).toEqual([key]);
    writeFileSync(keyFile, JSON.stringify(`${key}-forged`));
    expect(await lister.list(undefined, { prefix: key.slice(0, 20) })).toEqual([]);
    writeFileSync(keyFile, `"${key.slice(0, 40)}`); // half written
    expect(await lister.list(undefined, { prefix: key.slice(0, 20) })).toEqual([]);
    await release();
  });

  it("writes an entry the earlier format reads with every field as before, but the owner (unknown to it)", async () => {
    const locker = keep(new FileLocker({ directory, owner: "new-owner" }));
    const key = uniqueKey("list-compat");
    const release = await locker.lock(undefined, key);
    const [name] = readdirSync(join(directory, `${hashKey(key)}.lock`));
    const match = EARLIER_ENTRY.exec(name as string);
    expect(match).not.toBeNull();
    const [, , , , , pid, , , , , owner, host] = match as unknown as string[];
    // Process and host as before: the earlier reader still tells a dead holder of this host.
    expect([Number(pid), host]).toEqual([process.pid, HOST]);
    // Its owner reader decodes the field, and gives up on the key after it (`""`: owner unknown).
    expect(() => decodeURIComponent(owner as string)).toThrow(URIError);
    await release();
  });

  it("lists nothing, and creates nothing, where the lock directory does not exist", async () => {
    const missing = join(directory, "missing");
    const lister = keep(new FileLocker({ directory: missing }));
    expect(await lister.list(undefined)).toEqual([]);
    expect(readdirSync(directory)).not.toContain("missing");
  });
});
