/**
 * FileLocker against wall-clock steps and dead holders, with real processes (the children run the
 * built package): a holder or a waiter whose wall clock steps by an hour (libfaketime, moving only
 * CLOCK_REALTIME, as an NTP step does) neither gives a live lock away nor leaves a dead holder's
 * lock stuck; a holder that is SIGKILLed, or whose pid now belongs to another process, is taken
 * over at once instead of after its lease; and entries of another host, pid namespace or boot are
 * judged as they must be. No timing thresholds: outcomes and order only (a lease of 60 s against a
 * test timeout far below it).
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readdirSync, renameSync, rmSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileLocker, type FileLockerOptions, type Lease } from "../../src/index.js";
import { assertBuilt } from "../helpers/cli.js";
import { SteppedClock } from "../helpers/faketime.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { RemoteFileLocker, type RemoteSpawnOptions } from "../helpers/remote-locker.js";
import { eventually } from "../helpers/wait.js";

const HOUR = 3_600_000;
/** A lease far longer than any test here may take: a takeover proves the holder was found dead. */
const LONG_EXPIRY = 60_000;
/** Waiters look often, so that a lock given away would be taken at once. */
const EAGER = { backoff: { min: 10, max: 20 } } satisfies FileLockerOptions;

describe.skipIf(process.platform !== "linux")("FileLocker: wall-clock steps and dead holders (Linux)", () => {
  let directory: string;
  const children: RemoteFileLocker[] = [];
  const lockers: FileLocker[] = [];
  beforeAll(() => {
    assertBuilt();
    directory = tempLockDirectory("clock");
  });
  afterAll(async () => {
    await Promise.all([...children.map((child) => child.stop()), ...lockers.map((locker) => locker.close())]);
    rmSync(directory, { recursive: true, force: true });
  });
  const child = async (options: FileLockerOptions, spawn?: RemoteSpawnOptions): Promise<RemoteFileLocker> => {
    const started = await RemoteFileLocker.start({ directory, ...options }, spawn);
    children.push(started);
    return started;
  };
  const local = (options: FileLockerOptions = {}): FileLocker => {
    const locker = new FileLocker({ directory, ...options });
    lockers.push(locker);
    return locker;
  };
  const kill = async (victim: RemoteFileLocker): Promise<void> => {
    victim.child.kill("SIGKILL");
    await victim.exited;
  };

  it("the holder's wall clock steps back 1 h: a waiter does not take its live lock", async () => {
    const clock = new SteppedClock(directory, "holder-back");
    const holder = await child({ expiry: 1000 }, { env: clock.env });
    const lease = await holder.acquire(undefined, "holder-back");
    clock.step("-1h");
    expect(await holder.wallClock()).toBeLessThan(Date.now() - HOUR / 2);
    const waiter = local(EAGER);
    const outcome = await waitDuringExtensions(waiter, "holder-back", 3);
    expect(outcome, "the waiter took a live lock").toBe("still held by the holder");
    expect(lease.lost.aborted).toBe(false);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("the waiter's wall clock steps forward 1 h: it does not take the live lock", async () => {
    const clock = new SteppedClock(directory, "waiter-forward");
    const waiter = await child(EAGER, { env: clock.env });
    clock.step("+1h");
    expect(await waiter.wallClock()).toBeGreaterThan(Date.now() + HOUR / 2);
    const holder = local({ expiry: 1000 });
    const lease = await holder.acquire(undefined, "waiter-forward");
    const outcome = await waitDuringExtensions(waiter, "waiter-forward", 3, holder.lockPath("waiter-forward"));
    expect(outcome, "the waiter took a live lock").toBe("still held by the holder");
    lease.assertHeld();
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("a holder SIGKILLed after its wall clock stepped forward 1 h: a waiter takes over at once, not in an hour", async () => {
    const clock = new SteppedClock(directory, "dead-forward");
    const holder = await child({ expiry: LONG_EXPIRY }, { env: clock.env });
    clock.step("+1h");
    expect(await holder.wallClock()).toBeGreaterThan(Date.now() + HOUR / 2);
    await holder.acquire(undefined, "dead-forward");
    await kill(holder);
    const waiter = local();
    const lease = await waiter.acquire(AbortSignal.timeout(20_000), "dead-forward");
    expect(waiter.stats.deadHolderTakeovers).toBe(1);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("a holder SIGKILLed, the waiter's wall clock stepped back 1 h: the waiter takes over at once", async () => {
    const holder = await child({ expiry: LONG_EXPIRY });
    await holder.acquire(undefined, "dead-back");
    const clock = new SteppedClock(directory, "waiter-back");
    const waiter = await child({}, { env: clock.env });
    clock.step("-1h");
    expect(await waiter.wallClock()).toBeLessThan(Date.now() - HOUR / 2);
    await kill(holder);
    const lease = await waiter.acquire(AbortSignal.timeout(20_000), "dead-back");
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("a SIGKILLed holder's lock is taken over by a waiting process well before its 60 s lease ends", async () => {
    const holder = await child({ expiry: LONG_EXPIRY });
    await holder.acquire(undefined, "killed");
    const waiter = local();
    const waiting = waiter.acquire(AbortSignal.timeout(20_000), "killed");
    const killedAt = performance.now();
    await kill(holder);
    const lease = await waiting;
    console.log(`killed holder → next holder: ${Math.round(performance.now() - killedAt)} ms (lease 60 s)`);
    expect(waiter.stats.deadHolderTakeovers).toBe(1);
    // The new holder is this process (the default owner), live.
    expect((await waiter.inspect(undefined, "killed")).holders).toMatchObject([
      { owner: `${hostname()}:${process.pid}` },
    ]);
    expect(await lease.releaseWithOutcome()).toBe("released");
  });

  it("a SIGKILLed holder that led its process group is dead only once the children it left in the group are gone", async () => {
    // A holder that runs commands under its lock (as `globallock run` does) and leads its process
    // group (detached: setsid): its child `sleep` stays in the group when the holder is killed.
    const script = `
      const { FileLocker } = await import(${JSON.stringify(new URL("../../dist/esm/index.js", import.meta.url).href)});
      const { spawn } = await import("node:child_process");
      const locker = new FileLocker({ directory: ${JSON.stringify(directory)}, expiry: ${LONG_EXPIRY} });
      await locker.acquire(undefined, "group");
      const child = spawn("sleep", ["300"], { stdio: "ignore" });
      process.stdout.write(String(child.pid) + "\\n");
      setInterval(() => undefined, 1000);`;
    const holder = spawn(process.execPath, ["--input-type=module", "-e", script], {
      detached: true,
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = new Promise((resolve) => holder.once("exit", resolve));
    const [line] = (await once(holder.stdout, "data")) as [Buffer];
    const leftBehind = Number(line.toString().trim());
    try {
      holder.kill("SIGKILL");
      await exited;
      const waiter = local();
      // The holder is gone, its `sleep` is not: the lock is still held, and reads as not dead.
      expect((await waiter.inspect(undefined, "group")).holders).toHaveLength(1);
      expect(await waiter.tryAcquire(undefined, "group")).toBeUndefined();
      process.kill(leftBehind, "SIGKILL");
      await eventually(() => !existsSync(`/proc/${leftBehind}`));
      // Now nothing of the holder is left: taken over at once, not after the 60 s lease.
      const lease = await waiter.tryAcquire(undefined, "group");
      expect(lease).toBeDefined();
      expect(waiter.stats.deadHolderTakeovers).toBe(1);
      await lease?.release();
    } finally {
      if (existsSync(`/proc/${leftBehind}`)) process.kill(leftBehind, "SIGKILL");
    }
  });

  it("a holder whose pid now runs another process (another start time) is dead: taken over at once", async () => {
    const holder = await child({});
    const lease = await holder.acquire(undefined, "reused", { autoExtend: false, expiry: LONG_EXPIRY });
    // The same pid, started at another time: what a reused pid looks like.
    rewriteEntry(local().lockPath("reused"), (fields) => {
      fields[START] = String(Number(fields[START]) + 1);
    });
    const waiter = local();
    // A dead holder's entry is stale: inspect lists no holder.
    expect((await waiter.inspect(undefined, "reused")).holders).toEqual([]);
    const taken = await waiter.tryAcquire(undefined, "reused");
    expect(taken).toBeDefined();
    expect(waiter.stats.deadHolderTakeovers).toBe(1);
    expect(await lease.releaseWithOutcome()).toBe("taken");
    expect(await taken?.releaseWithOutcome()).toBe("released");
  });

  it("a dead holder's entry from another host or pid namespace waits for its lease; from an earlier boot it does not", async () => {
    const waiter = local();
    const forge = async (key: string, change: (fields: string[]) => void): Promise<Lease> => {
      const holder = await child({});
      const lease = await holder.acquire(undefined, key, { autoExtend: false, expiry: LONG_EXPIRY });
      await kill(holder);
      rewriteEntry(waiter.lockPath(key), change);
      return lease;
    };
    // Its pid is gone here, but it is another machine's (or container's) pid: not a proof of death.
    await forge("other-host", (fields) => {
      fields.splice(HOST, fields.length - HOST, "elsewhere", "example");
    });
    await forge("other-namespace", (fields) => {
      fields[NAMESPACE] = String(Number(fields[NAMESPACE]) + 1);
    });
    for (const key of ["other-host", "other-namespace"]) {
      expect((await waiter.inspect(undefined, key)).holders, key).toHaveLength(1);
      expect(await waiter.tryAcquire(undefined, key), key).toBeUndefined();
    }
    // This host, an earlier boot: every process of that boot is gone.
    await forge("earlier-boot", (fields) => {
      fields[BOOT] = "0123456789abcdef0123456789abcdef";
    });
    const taken = await waiter.tryAcquire(undefined, "earlier-boot");
    expect(taken).toBeDefined();
    expect(await taken?.releaseWithOutcome()).toBe("released");
  });
});

/** Field indexes in an entry's name `T.D.W.A.P.S.N.B.F.O.host` (the host may hold dots). */
const START = 5;
const NAMESPACE = 6;
const BOOT = 7;
const HOST = 10;

/** Renames the one entry of a lock, changing the fields of its name. */
function rewriteEntry(lock: string, change: (fields: string[]) => void): void {
  const [name] = readdirSync(lock) as [string];
  const fields = name.split(".");
  change(fields);
  renameSync(join(lock, name), join(lock, fields.join(".")));
}

/**
 * Lets `waiter` wait for `key` while its holder extends it `extensions` times (each extension
 * renames the holder's entry; seen by watching the lock directory), then stops the wait. Resolves
 * to "still held by the holder" when the waiter never got the lock and the holder's entry was the
 * only one throughout, else to what happened.
 */
async function waitDuringExtensions(
  waiter: FileLocker | RemoteFileLocker,
  key: string,
  extensions: number,
  lockPath = (waiter as FileLocker).lockPath(key),
): Promise<string> {
  const [first] = readdirSync(lockPath) as [string];
  const token = first.split(".")[0];
  const stop = new AbortController();
  let got: Lease | undefined;
  const waiting = waiter.acquire(stop.signal, key).then(
    (lease) => {
      got = lease;
    },
    () => undefined,
  );
  const names = new Set([first]);
  let other: string | undefined;
  await eventually(() => {
    for (const name of safeReaddir(lockPath)) {
      if (!name.startsWith(`${token}.`)) other = name;
      names.add(name);
    }
    return other !== undefined || got !== undefined || names.size > extensions;
  }, 20_000);
  stop.abort(new Error("enough extensions seen"));
  await waiting;
  if (got !== undefined) {
    await got.release();
    return "the waiter got the lock";
  }
  return other === undefined ? "still held by the holder" : `another entry appeared: ${other}`;
}

function safeReaddir(path: string): string[] {
  try {
    return readdirSync(path);
  } catch {
    return [];
  }
}
