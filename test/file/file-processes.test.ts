/**
 * FileLocker across real processes: the lock contract with its peer in a child process (on the
 * built package, so npm test builds first), stale-lock stealers in two processes starting on the
 * same microsecond, a directory its user may not write, a waiting process kept alive.
 */
import { execFile } from "node:child_process";
import { chmodSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileLocker, type Locker } from "../../src/index.js";
import { type LockerHarness, lockerContract } from "../contracts/contract.js";
import { assertBuilt } from "../helpers/cli.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { RemoteFileLocker } from "../helpers/remote-locker.js";

const run = promisify(execFile);

/** The contract harness: `create` makes a FileLocker here, `peer` one in a new child process. */
function crossProcessHarness(): () => Promise<LockerHarness> {
  return async () => {
    assertBuilt();
    const directory = tempLockDirectory("peer");
    const local: FileLocker[] = [];
    const remote: RemoteFileLocker[] = [];
    const backoff = (options?: { wakeOnly?: boolean }) =>
      options?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 } } : {};
    return {
      create: async (options) => {
        const locker = new FileLocker({ directory, ...backoff(options) });
        local.push(locker);
        return locker;
      },
      peer: async (_locker: Locker, options) => {
        const locker = await RemoteFileLocker.start({ directory, ...backoff(options) });
        remote.push(locker);
        return locker;
      },
      fencing: true,
      handOff: true,
      cleanup: async () => {
        await Promise.all([...local.map((l) => l.close()), ...remote.map((r) => r.stop())]);
        rmSync(directory, { recursive: true, force: true });
      },
    };
  };
}

lockerContract("FileLocker (peer: a FileLocker in a child process)", crossProcessHarness());

describe("FileLocker across processes", () => {
  let directory: string;
  const children: RemoteFileLocker[] = [];
  beforeAll(() => {
    assertBuilt();
    directory = tempLockDirectory("procs");
  });
  afterAll(async () => {
    await Promise.all(children.map((child) => child.stop()));
    rmSync(directory, { recursive: true, force: true });
  });

  it("two stealers in two processes racing for a stale lock 200 times: exactly one wins each time", async () => {
    const [a, b] = await Promise.all([RemoteFileLocker.start({ directory }), RemoteFileLocker.start({ directory })]);
    children.push(a, b);
    const here = new FileLocker({ directory });
    let raced = 0;
    try {
      for (let round = 0; round < 200; round++) {
        const key = `stale-${round}`;
        // A dead holder's lock: an entry whose deadline has passed.
        const lease = await here.acquire(undefined, key, { autoExtend: false, expiry: 60_000 });
        const lock = here.lockPath(key);
        const [name] = readdirSync(lock) as [string];
        // token.deadline(monotonic).deadline(wall).rest: both deadlines in the past.
        const [token, _deadline, _wallDeadline, ...rest] = name.split(".");
        renameSync(join(lock, name), join(lock, [token, 1, 1, ...rest].join(".")));
        const at = performance.timeOrigin + performance.now() + 5;
        const [x, y] = await Promise.all([a.raceAt(key, at), b.raceAt(key, at)]);
        expect(Number(x.won) + Number(y.won), `round ${round}`).toBe(1);
        if (x.lostRace || y.lostRace) raced += 1;
        await Promise.all([x.release(), y.release()]);
        expect(await lease.releaseWithOutcome()).toBe("expired");
      }
    } finally {
      await here.close();
    }
    // In some rounds both found the stale entry and raced to remove it.
    expect(raced).toBeGreaterThan(0);
  });

  it("a waiting process stays alive until the lock is released, then gets it", async () => {
    const here = new FileLocker({ directory });
    const release = await here.lock(undefined, "alive");
    const script = `import("globallock").then(async ({ FileLocker }) => {
      const locker = new FileLocker({ directory: ${JSON.stringify(directory)} });
      const release = await locker.lock(undefined, "alive");
      console.log("got it");
      await release();
      await locker.close();
    });`;
    const child = run(process.execPath, ["--input-type=module", "-e", script], { cwd: process.cwd() });
    setTimeout(() => void release(), 400);
    const { stdout } = await child;
    expect(stdout).toBe("got it\n");
    await here.close();
  });

  it("a directory its user may not write: a StoreUnavailableError with the cause (EACCES)", async () => {
    const readOnly = join(directory, "read-only");
    mkdirSync(readOnly, { mode: 0o555 });
    chmodSync(readOnly, 0o555);
    const asRoot = process.getuid?.() === 0;
    try {
      // Root may write anywhere: the locker runs as root without the capabilities that bypass
      // file permissions (setpriv), in a child process, so the directory's own mode applies.
      // (Not as another user: that user may not be able to read a checkout in a private folder.)
      const locker: Locker = asRoot
        ? await RemoteFileLocker.start(
            { directory: readOnly },
            {
              execPath: "setpriv",
              execArgv: [
                "--bounding-set=-dac_override,-dac_read_search",
                "--inh-caps=-dac_override,-dac_read_search",
                process.execPath,
              ],
            },
          )
        : new FileLocker({ directory: readOnly });
      if (locker instanceof RemoteFileLocker) children.push(locker);
      const error = (await locker.tryLock(undefined, "k").catch((e: unknown) => e)) as Error & { code?: string };
      expect(error.name).toBe("StoreUnavailableError");
      expect(error.code).toBe("ERR_GLOBALLOCK_STORE_UNAVAILABLE");
      expect(error.message).toContain(readOnly);
      expect(error.message).toMatch(/EACCES/);
      await locker.close();
    } finally {
      chmodSync(readOnly, 0o700);
    }
    // The same directory, writable again, works.
    writeFileSync(join(readOnly, "ignored"), "");
    const writable = new FileLocker({ directory: readOnly });
    const [ok, release] = await writable.tryLock(undefined, "k");
    expect(ok).toBe(true);
    await release();
    await writable.close();
  });
});
