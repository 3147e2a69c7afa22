/**
 * The ZooKeeper lockers against real faults of a real 3-member ensemble: kill -9 of the leader
 * while locks are held, a holder process SIGKILLed (its node goes when ZooKeeper expires its
 * session, not before), a holder process SIGSTOPped past its session timeout (it hears of its
 * loss once it resumes; another process held the key meanwhile), and the deployment check of an
 * ensemble. The holder processes run a bundle of the sources (esbuild), so no build is needed.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkDeployment, type LockLostError, StoreUnavailableError } from "../../src/index.js";
import { uniqueKey } from "../contracts/contract.js";
import { fourLetterWord, ZooKeeperFixture } from "../helpers/zookeeper-harness.js";

/** What a holder child says: its fencing token and session once it holds, then its loss. */
interface ChildMessage {
  readonly token?: string;
  readonly lost?: boolean;
  readonly reason?: string;
}

describe("ZooKeeper faults (3-member ensemble)", () => {
  let fixture: ZooKeeperFixture;
  let bundleDir: string;
  let bundle: string;

  beforeAll(async () => {
    bundleDir = mkdtempSync(join(tmpdir(), "globallock-zookeeper-bundle-"));
    bundle = join(bundleDir, "zookeeper-locker.mjs");
    const bundling = build({
      entryPoints: ["src/zookeeper/zookeeper-locker.ts"],
      bundle: true,
      platform: "node",
      format: "esm",
      outfile: bundle,
      logLevel: "silent",
    });
    [fixture] = await Promise.all([ZooKeeperFixture.start(3), bundling]);
  });
  afterAll(async () => {
    await fixture?.stop();
    rmSync(bundleDir, { recursive: true, force: true });
  });

  /** A holder of `key` in a child process, on a session of `sessionTimeout` ms, and its first message. */
  async function holderChild(key: string, sessionTimeout: number): Promise<[ChildProcess, ChildMessage]> {
    const spec = {
      connectionString: fixture.ensemble.connectionString,
      sessionTimeout,
      key,
      expiry: sessionTimeout,
      owner: "zookeeper-child",
      module: bundle,
    };
    const child = fork("test/helpers/zookeeper-holder-child.mjs", [JSON.stringify(spec)], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    return [child, await nextMessage(child)];
  }

  /** Retries `attempt` while the ensemble is unavailable (clients reconnect after an election). */
  async function despiteElection<T>(attempt: () => Promise<T>): Promise<T> {
    for (let tries = 1; ; tries++) {
      try {
        return await attempt();
      } catch (error) {
        if (!(error instanceof StoreUnavailableError) || tries === 20) throw error;
      }
    }
  }

  it("kill -9 of the leader while locks are held: never two holders, locks after the election, fencing tokens keep rising", async () => {
    const lost: LockLostError[] = [];
    // A lease as long as the session: it outlives an election, as the session does.
    const holder = fixture.locker({ sessionTimeout: 10_000, expiry: 10_000, onLockLost: (error) => lost.push(error) });
    const other = fixture.locker({ sessionTimeout: 10_000, expiry: 10_000 });
    const keys = [uniqueKey("zk-failover"), uniqueKey("zk-failover")];
    const leases = await Promise.all(keys.map((key) => holder.acquire(undefined, key, { fencing: true })));
    const before = leases.map((lease) => lease.fencingToken as bigint);
    const oldLeader = await fixture.ensemble.kill();
    // During and after the election the holder keeps both keys: nobody else gets them.
    for (const key of keys) {
      const stolen = await other.tryAcquire(undefined, key).catch((error: unknown) => error);
      expect(stolen === undefined || stolen instanceof StoreUnavailableError).toBe(true);
    }
    const newLeader = await fixture.ensemble.waitForLeader();
    expect(newLeader.id).not.toBe(oldLeader.id);
    const fresh = await despiteElection(() =>
      other.acquire(AbortSignal.timeout(10_000), uniqueKey("zk-failover"), { fencing: true }),
    );
    expect(fresh.fencingToken as bigint).toBeGreaterThan(before[1] as bigint);
    for (const key of keys) expect(await despiteElection(() => other.tryAcquire(undefined, key))).toBeUndefined();
    for (const lease of leases) expect(lease.lost.aborted).toBe(false);
    expect(lost).toEqual([]);
    // The next holder of a key gets a higher token than any before.
    const waiting = other.acquire(AbortSignal.timeout(10_000), keys[0] as string, { fencing: true });
    expect(await leases[0]?.releaseWithOutcome()).toBe("released");
    const next = await waiting;
    expect(next.fencingToken as bigint).toBeGreaterThan(fresh.fencingToken as bigint);
    await Promise.all([next.release(), fresh.release(), leases[1]?.release()]);
    await fixture.ensemble.restart(oldLeader);
  });

  it("a SIGKILLed holder's lock outlives its process until ZooKeeper expires its session; the next holder gets it then", async () => {
    const key = uniqueKey("zk-sigkill");
    const [child, held] = await holderChild(key, 3000);
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    const waiter = fixture.locker({ sessionTimeout: 10_000, expiry: 10_000 });
    // The dead process's node is still there, under its live (if silent) session: ZooKeeper keeps
    // it for the session timeout (3 s) after it last heard from the process, and this read comes
    // right after the kill.
    const seen = await waiter.inspect(undefined, key);
    expect(seen.holders.map((holder) => [holder.owner, holder.fencingToken])).toEqual([
      ["zookeeper-child", BigInt(held.token as string)],
    ]);
    const lease = await waiter.acquire(AbortSignal.timeout(20_000), key, { fencing: true });
    expect(lease.fencingToken as bigint).toBeGreaterThan(BigInt(held.token as string));
    // By then the leader had expired the child's session: no session of the ensemble holds a node of the key but the waiter's.
    const leader = await fixture.ensemble.waitForLeader();
    const dump = await fourLetterWord(leader.clientPort, "dump");
    expect(dump.split("\n").filter((line) => line.includes(`/${key}/`))).toHaveLength(1);
    await lease.release();
  });

  it("a holder SIGSTOPped past its session timeout: another process holds the key meanwhile, and the holder's lost says expired once it resumes", async () => {
    const key = uniqueKey("zk-sigstop");
    const [child, held] = await holderChild(key, 1500);
    try {
      const stale = BigInt(held.token as string);
      child.kill("SIGSTOP");
      const taker = fixture.locker({ sessionTimeout: 10_000, expiry: 10_000, owner: "zookeeper-taker" });
      const lease = await taker.acquire(AbortSignal.timeout(20_000), key, { fencing: true });
      expect(lease.fencingToken as bigint).toBeGreaterThan(stale);
      const holders = (await taker.inspect(undefined, key)).holders.map((holder) => holder.owner);
      expect(holders).toEqual(["zookeeper-taker"]);
      const lostMessage = nextMessage(child);
      child.kill("SIGCONT");
      expect(await lostMessage).toEqual({ lost: true, reason: "expired" });
      expect(await lease.releaseWithOutcome()).toBe("released");
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("checkDeployment: an ensemble of three voting members is no finding", async () => {
    expect(await checkDeployment(fixture.locker())).toEqual([]);
  });
});

/** The next message `child` sends. */
function nextMessage(child: ChildProcess): Promise<ChildMessage> {
  return new Promise((resolve) => child.once("message", (message) => resolve(message as ChildMessage)));
}
