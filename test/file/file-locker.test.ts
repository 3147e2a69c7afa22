import { execFileSync } from "node:child_process";
import {
  chownSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  open,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DirectoryWatcher } from "../../src/file/watcher.js";
import {
  defaultLockDirectory,
  FileLocker,
  type FileLockerOptions,
  InvalidArgumentError,
  LockLostError,
  StoreUnavailableError,
} from "../../src/index.js";
import { lockerContract, whenAborted } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { fileLockerHarness, tempLockDirectory } from "../helpers/file-harness.js";
import { eventually, sleep, untilWaiting } from "../helpers/wait.js";

lockerContract("FileLocker (peer: another FileLocker on the same directory)", fileLockerHarness());
lockAllSuite("FileLocker", fileLockerHarness());

describe("FileLocker specifics", () => {
  const directories: string[] = [];
  const lockers: FileLocker[] = [];
  const dir = (): string => {
    const made = tempLockDirectory("spec");
    directories.push(made);
    return made;
  };
  const make = (options: FileLockerOptions): FileLocker => {
    const locker = new FileLocker(options);
    lockers.push(locker);
    return locker;
  };
  afterAll(async () => {
    await Promise.all(lockers.map((locker) => locker.close()));
    for (const made of directories) rmSync(made, { recursive: true, force: true });
  });

  it("maps keys with /, .., NUL and 1,000 bytes to hashed names inside the directory, each its own lock", async () => {
    const directory = dir();
    const locker = make({ directory });
    const keys = ["a/b", "../../etc/passwd", "..", "/", "nul\0byte", "x".repeat(1000), "é".repeat(500), "a\\b"];
    const leases = [];
    for (const key of keys) {
      const lease = await locker.tryAcquire(undefined, key, { fencing: true });
      expect(lease?.key).toBe(key);
      leases.push(lease);
    }
    for (const key of keys) expect(await locker.tryAcquire(undefined, key)).toBeUndefined();
    // The two keys too long for an entry's name get a key file each, written beside their take
    // (see key-field.ts), named by the hash too.
    await eventually(() => readdirSync(directory).filter((name) => name.startsWith(".key-")).length === 2);
    const names = readdirSync(directory);
    expect(names.filter((name) => name.endsWith(".lock"))).toHaveLength(keys.length);
    for (const name of names) expect(name).toMatch(/^(?:[0-9a-f]{64}\.(?:lock|fence)|\.key-[0-9a-f]{64})$/);
    for (const key of keys) expect(dirname(locker.lockPath(key))).toBe(directory);
    const info = await locker.inspect(undefined, "nul\0byte");
    expect(info).toMatchObject({ key: "nul\0byte", waiting: 0 });
    expect(info.holders).toMatchObject([{ owner: `${hostname()}:${process.pid}`, mode: "exclusive", weight: 1 }]);
    expect(info.holders[0]?.fencingToken).toBeTypeOf("bigint");
    for (const lease of leases) expect(await lease?.releaseWithOutcome()).toBe("released");
    // Released: each lock directory is left empty (free), beside at most 4 spare attempt directories.
    const left = readdirSync(directory).filter((name) => !name.endsWith(".fence") && !name.startsWith(".key-"));
    for (const name of left.filter((entry) => entry.endsWith(".lock")))
      expect(readdirSync(join(directory, name))).toEqual([]);
    expect(left.filter((name) => !name.endsWith(".lock")).length).toBeLessThanOrEqual(4);
    expect(await locker.inspect(undefined, "a/b")).toEqual({ key: "a/b", holders: [], waiting: 0 });
    await locker.close();
    // Closed: only the fencing counters and the key files stay.
    expect(readdirSync(directory).filter((name) => !name.endsWith(".fence") && !name.startsWith(".key-"))).toEqual([]);
  });

  it('a release the file system leaves unanswered for 5 s reports "unknown", and the lock is freed once it runs', async () => {
    const directory = dir();
    const pooled = make({ directory, syncCalls: false });
    const lease = await pooled.acquire(undefined, "stuck");
    // Every thread of libuv's pool blocked: each opens a FIFO for reading, which waits for a writer.
    const fifo = join(directory, "pool-blocker");
    execFileSync("mkfifo", [fifo]);
    const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    const blocked = Array.from(
      { length: threads },
      () =>
        new Promise<number>((resolve, reject) => open(fifo, "r", (error, fd) => (error ? reject(error) : resolve(fd)))),
    );
    let outcome: string;
    let waited: number;
    let giveUp: NodeJS.Timeout | undefined;
    try {
      const started = performance.now();
      const noAnswer = new Promise<string>((resolve) => {
        giveUp = setTimeout(() => resolve("no answer in 12 s"), 12_000);
      });
      outcome = await Promise.race([lease.releaseWithOutcome(), noAnswer]);
      waited = performance.now() - started;
    } finally {
      clearTimeout(giveUp);
      // A writer unblocks every reader (even when the release failed to answer: the pool must not
      // stay blocked); then the release's queued calls run.
      const writer = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      for (const fd of await Promise.all(blocked)) closeSync(fd);
      closeSync(writer);
    }
    expect(outcome).toBe("unknown");
    expect(waited).toBeGreaterThanOrEqual(4900);
    await eventually(async () => {
      const again = await pooled.tryAcquire(undefined, "stuck");
      await again?.release();
      return again !== undefined;
    });
  }, 20_000);

  it("through the thread pool a release removes the lock directory it emptied; on the event loop it is left empty", async () => {
    const directory = dir();
    const pooled = make({ directory, syncCalls: false });
    const synchronous = make({ directory, syncCalls: true });
    for (let round = 0; round < 3; round++) {
      // Thread pool: removed after the release resolved (off its path), so the next take renames its
      // attempt onto an absent lock.
      const release = await pooled.lock(undefined, "pooled");
      expect(readdirSync(pooled.lockPath("pooled"))).toHaveLength(1);
      await release();
      await eventually(() => !existsSync(pooled.lockPath("pooled")));
      // Event loop: the emptied lock stays (free) for the next take, which replaces it.
      const releaseSync = await synchronous.lock(undefined, "synchronous");
      await releaseSync();
      await sleep(20);
      expect(readdirSync(synchronous.lockPath("synchronous"))).toEqual([]);
    }
    // The removal never takes a lock taken again meanwhile: the key taken again at once stays held.
    for (let round = 0; round < 50; round++) {
      const release = await pooled.lock(undefined, "again");
      await release();
      const next = await pooled.tryAcquire(undefined, "again");
      expect(next).toBeDefined();
      await sleep(1);
      expect(readdirSync(pooled.lockPath("again"))).toHaveLength(1);
      next?.assertHeld();
      await next?.release();
    }
  });

  it("two contenders racing for a stale lock 200 times: exactly one wins each time", async () => {
    const directory = dir();
    const a = make({ directory });
    const b = make({ directory });
    const dead = make({ directory });
    let raced = 0;
    for (let round = 0; round < 200; round++) {
      const key = `stale-${round}`;
      // A holder that never extends and "dies": its entry stays, its deadline passes.
      const lease = await dead.acquire(undefined, key, { autoExtend: false, expiry: 200 });
      makeStale(dead.lockPath(key));
      const before = a.stats.lostTakeoverRaces + b.stats.lostTakeoverRaces;
      const [x, y] = await Promise.all([a.tryAcquire(undefined, key), b.tryAcquire(undefined, key)]);
      expect([x, y].filter((won) => won !== undefined)).toHaveLength(1);
      if (a.stats.lostTakeoverRaces + b.stats.lostTakeoverRaces > before) raced += 1;
      expect(await lease.releaseWithOutcome()).not.toBe("released");
      expect(await (x ?? y)?.releaseWithOutcome()).toBe("released");
    }
    expect(a.stats.staleTakeovers + b.stats.staleTakeovers).toBe(200);
    // Both saw the stale entry and tried to remove it in some of the rounds (a real race).
    expect(raced).toBeGreaterThan(0);
  });

  it("a lock deleted behind its holder's back is reported lost at the next extension; release says so", async () => {
    const directory = dir();
    const lost: LockLostError[] = [];
    const locker = make({ directory, expiry: 400, onLockLost: (error) => lost.push(error) });
    const lease = await locker.acquire(undefined, "deleted");
    rmSync(locker.lockPath("deleted"), { recursive: true });
    const reason = await whenAborted(lease.lost);
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("taken");
    expect(lost).toEqual([reason]);
    expect(() => lease.assertHeld()).toThrow(LockLostError);
    expect(locker.heldCount).toBe(0);
    // Someone else holds it now: the stale release leaves that holder alone and says "taken".
    const next = await make({ directory }).acquire(undefined, "deleted");
    expect(await lease.releaseWithOutcome()).toBe("taken");
    next.assertHeld();
    expect(await next.releaseWithOutcome()).toBe("released");
    // Deleted and nobody took it: "expired".
    const other = await locker.acquire(undefined, "deleted-only");
    rmSync(locker.lockPath("deleted-only"), { recursive: true });
    await whenAborted(other.lost);
    expect(await other.releaseWithOutcome()).toBe("expired");
  });

  it("extends every expiry / 2: the entry's deadline moves and the lease is kept", async () => {
    const directory = dir();
    const locker = make({ directory, expiry: 300 });
    const lease = await locker.acquire(undefined, "kept");
    const entry = (): string => readdirSync(locker.lockPath("kept"))[0] as string;
    const first = entry();
    await sleep(400);
    const later = entry();
    // T.D.W.A…: the deadlines moved on, the grant time stayed.
    const field = (name: string, index: number): number => Number(name.split(".")[index]);
    expect(field(later, 1)).toBeGreaterThan(field(first, 1));
    expect(field(later, 3)).toBe(field(first, 3));
    expect((await locker.inspect(undefined, "kept")).holders[0]?.expiresInMs).toBeGreaterThan(0);
    lease.assertHeld();
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("fencing tokens rise across lockers and survive released locks; the counter is one file", async () => {
    const directory = dir();
    const a = make({ directory });
    const b = make({ directory });
    const tokens: bigint[] = [];
    await Promise.all(
      [a, b, a, b, a, b].map(async (locker) => {
        const lease = await locker.acquire(AbortSignal.timeout(5000), "fenced", { fencing: true });
        tokens.push(lease.fencingToken as bigint);
        await lease.release();
      }),
    );
    expect(tokens).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
    const fence = readdirSync(directory).find((name) => name.endsWith(".fence")) as string;
    expect(readdirSync(join(directory, fence))).toEqual(["6"]);
  });

  it("leaves no waiter or file behind after waits, aborts and close", async () => {
    const directory = dir();
    const locker = make({ directory });
    const peer = make({ directory });
    const release = await locker.lock(undefined, "busy");
    const controllers = Array.from({ length: 5 }, () => new AbortController());
    const waits = controllers.map((c) => peer.lock(c.signal, "busy").catch((e: unknown) => e));
    await untilWaiting(peer, 5);
    for (const c of controllers) c.abort();
    const results = await Promise.all(waits);
    for (const [i, result] of results.entries()) expect(result).toBe(controllers[i]?.signal.reason);
    expect(peer.waitingCount).toBe(0);
    expect(locker.heldCount).toBe(1);
    await release();
    expect(locker.heldCount).toBe(0);
    await Promise.all([locker.close(), peer.close()]);
    expect(readdirSync(directory)).toEqual([]);
  });

  it("the directory watcher is open only while someone waits (closed in the next turn), and wakes only the key's subscribers", async () => {
    const directory = dir();
    const watcher = new DirectoryWatcher(directory);
    const woken: string[] = [];
    // Subscribers name a key's hash; events about any of its names (a.lock, a.rd, …) wake them.
    const stopA = watcher.subscribe("a", () => woken.push("a"));
    const stopB = watcher.subscribe("b", () => woken.push("b"));
    expect(watcher.watching).toBe(true);
    mkdirSync(join(directory, "a.lock"));
    await eventually(() => woken.length > 0);
    expect(woken).not.toContain("b");
    stopA();
    stopA();
    expect(watcher.watching).toBe(true);
    stopB();
    // Closed once the callbacks of this turn are done (a waiter that took its key resumes first)...
    expect(watcher.watching).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(watcher.watching).toBe(false);
    // ...unless someone subscribed meanwhile.
    const stopC = watcher.subscribe("c", () => undefined);
    stopC();
    const stopD = watcher.subscribe("d", () => undefined);
    await new Promise((resolve) => setImmediate(resolve));
    expect(watcher.watching).toBe(true);
    stopD();
    await new Promise((resolve) => setImmediate(resolve));
    expect(watcher.watching).toBe(false);
  });

  it("a lock directory removed while the locker lives is made again at the next attempt", async () => {
    const parent = dir();
    const directory = join(parent, "locks");
    const locker = make({ directory });
    await (await locker.lock(undefined, "k"))();
    rmSync(directory, { recursive: true });
    const release = await locker.lock(AbortSignal.timeout(2000), "k");
    expect(existsSync(locker.lockPath("k"))).toBe(true);
    await release();
  });

  it("a directory that cannot be created is a StoreUnavailableError with its cause", async () => {
    const file = join(dir(), "not-a-directory");
    writeFileSync(file, "");
    for (const directory of [join(file, "locks"), ...(existsSync("/proc/self") ? ["/proc/self/globallock/x"] : [])]) {
      const locker = make({ directory });
      const error = await locker.tryLock(undefined, "k").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).message).toContain(directory);
      expect((error as StoreUnavailableError).cause).toBeDefined();
      await expect(locker.lock(AbortSignal.timeout(1000), "k")).rejects.toBeInstanceOf(StoreUnavailableError);
    }
  });

  it("the default directory is per user, mode 0700, and refused when it belongs to someone else", async () => {
    const saved = process.env.TMPDIR;
    const tmp = dir();
    process.env.TMPDIR = tmp;
    try {
      expect(defaultLockDirectory()).toBe(join(tmp, `globallock-${process.getuid?.()}`));
      const locker = make({});
      expect(locker.directory).toBe(defaultLockDirectory());
      const release = await locker.lock(undefined, "k");
      expect(statSync(locker.directory).mode & 0o777).toBe(0o700);
      await release();
      if (process.getuid?.() === 0) {
        chownSync(locker.directory, 65534, 65534);
        const error = await make({})
          .tryLock(undefined, "k")
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StoreUnavailableError);
        expect((error as Error).message).toMatch(/belongs to another user/);
      }
      rmSync(locker.directory, { recursive: true });
      symlinkSync(tmp, locker.directory);
      const error = await make({})
        .tryLock(undefined, "k")
        .catch((e: unknown) => e);
      expect((error as Error).message).toMatch(/not a directory/);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });

  it("rejects bad options with an InvalidArgumentError naming the value", () => {
    expect(() => new FileLocker({ directory: "" })).toThrow(/options\.directory.*string ""/);
    expect(() => new FileLocker({ directory: "a\0b" })).toThrow(InvalidArgumentError);
    expect(() => new FileLocker({ expiry: 100 })).toThrow(/options\.expiry.*number 100/);
    expect(() => new FileLocker({ backoff: { min: 0 } })).toThrow(/options\.backoff\.min/);
    expect(() => new FileLocker({ onLockLost: 1 as never })).toThrow(/options\.onLockLost/);
    expect(() => new FileLocker({ prefix: "x" } as never)).toThrow(/options\.prefix/);
    expect(() => new FileLocker({ syncCalls: "yes" as never })).toThrow(/options\.syncCalls/);
  });

  for (const syncCalls of [false, true]) {
    it(`syncCalls: ${syncCalls}: a spare taken away between pairs (a sweep) is rebuilt; locks exclude; close leaves nothing`, async () => {
      const directory = dir();
      const one = make({ directory, syncCalls });
      const two = make({ directory, syncCalls });
      for (let pair = 0; pair < 5; pair++) {
        const release = await one.lock(undefined, "spare");
        expect(await two.tryAcquire(undefined, "spare")).toBeUndefined();
        await release();
        // What a sweep of old attempt directories does: every spare moved away and removed.
        for (const name of readdirSync(directory).filter((entry) => entry.includes(".tmp-"))) {
          rmSync(join(directory, name), { recursive: true });
        }
      }
      const lease = await two.acquire(undefined, "spare");
      expect(await one.tryAcquire(undefined, "spare")).toBeUndefined();
      await lease.release();
      await Promise.all([one.close(), two.close()]);
      expect(readdirSync(directory)).toEqual([]);
    });
  }
});

/** Moves the entry of a lock (a holder that stopped extending) to a deadline in the past. */
function makeStale(lock: string): void {
  for (const name of readdirSync(lock)) {
    // token.deadline(monotonic).deadline(wall).rest: both deadlines in the past.
    const [token, _deadline, _wallDeadline, ...rest] = name.split(".");
    renameSync(join(lock, name), join(lock, [token, 1, 1, ...rest].join(".")));
  }
}
