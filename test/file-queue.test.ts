/**
 * FileLocker's waiting queue across real processes (see src/file/lock-queue.ts): waiters are
 * served in arrival order, and a waiter that is killed or frozen while queued holds up those behind
 * it no longer than its ticket lasts (a killed one: until the next look, which finds it dead).
 */
import { readdirSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileLocker } from "../src/index.js";
import { assertBuilt } from "./helpers/cli.js";
import { tempLockDirectory } from "./helpers/file-harness.js";
import { RemoteFileLocker } from "./helpers/remote-locker.js";
import { eventually, sleep } from "./helpers/wait.js";

let directory: string;
const children: RemoteFileLocker[] = [];
const local: FileLocker[] = [];

beforeAll(() => {
  assertBuilt();
  directory = tempLockDirectory("queue");
});
afterAll(async () => {
  await Promise.all([...children.map((child) => child.stop()), ...local.map((locker) => locker.close())]);
  rmSync(directory, { recursive: true, force: true });
});

async function child(options: { backoffMax?: number } = {}): Promise<RemoteFileLocker> {
  const backoff = options.backoffMax === undefined ? {} : { backoff: { min: 20, max: options.backoffMax } };
  const started = await RemoteFileLocker.start({ directory, ...backoff });
  children.push(started);
  return started;
}

function here(): FileLocker {
  const locker = new FileLocker({ directory });
  local.push(locker);
  return locker;
}

/** The tickets in `key`'s queue directory (none once it is gone). */
function tickets(holder: FileLocker, key: string): string[] {
  try {
    return readdirSync(holder.lockPath(key).replace(/\.lock$/, ".q"));
  } catch {
    return [];
  }
}

/**
 * `key` held here, and two child processes queued for it in turn: `first` (its backoff up to
 * `firstBackoffMax`, which sets how long its ticket lasts unless refreshed: 3 × that + 1 s), then
 * `behind` (backoff up to 1 s). Each waits up to `timeout` ms.
 */
async function twoQueued(key: string, firstBackoffMax: number, timeout = 30_000) {
  const holder = here();
  const release = await holder.lock(undefined, key);
  const first = await child({ backoffMax: firstBackoffMax });
  const firstWaits = first.lock(AbortSignal.timeout(timeout), key);
  firstWaits.catch(() => undefined);
  await eventually(() => tickets(holder, key).length === 1);
  const behind = await child({ backoffMax: 1000 });
  const behindWaits = behind.lock(AbortSignal.timeout(timeout), key);
  await eventually(() => tickets(holder, key).length === 2);
  return { holder, release, first, firstWaits, behindWaits };
}

describe("FileLocker's queue across processes", () => {
  it("serves waiters of three processes and this one in the order they came", async () => {
    const holder = here();
    const key = "arrival-order";
    const release = await holder.lock(undefined, key);
    const order: string[] = [];
    const waits: Array<Promise<void>> = [];
    const waiters: Array<[string, { lock: FileLocker["lock"] }]> = [
      ["b", await child()],
      ["c", await child()],
      ["d", await child()],
      ["e", here()],
    ];
    for (const [name, locker] of waiters) {
      const queuedBefore = tickets(holder, key).length;
      waits.push(
        locker.lock(AbortSignal.timeout(20_000), key).then(async (releaseIt) => {
          order.push(name);
          await sleep(20);
          await releaseIt();
        }),
      );
      // Each comes once the one before it holds its ticket.
      await eventually(() => tickets(holder, key).length === queuedBefore + 1);
    }
    await release();
    await Promise.all(waits);
    expect(order).toEqual(["b", "c", "d", "e"]);
    expect(tickets(holder, key)).toEqual([]);
  });

  it("a waiter killed while queued holds up the one behind it only until its next look", async () => {
    const key = "killed-waiter";
    // The killed waiter's ticket would last 3 × 20 s + 1 s; the one behind it looks every second.
    const { holder, release, first: killed, behindWaits } = await twoQueued(key, 20_000, 15_000);
    killed.child.kill("SIGKILL");
    await killed.exited;
    await release();
    const releaseBehind = await behindWaits;
    await releaseBehind();
    expect(tickets(holder, key)).toEqual([]);
  });

  it("a waiter frozen while queued holds up those behind it until its ticket lapses, then queues again", async () => {
    const key = "frozen-waiter";
    // Its ticket lasts 3 × 1 s + 1 s unless refreshed.
    const { holder, release, first: frozen, firstWaits: frozenWaits, behindWaits } = await twoQueued(key, 1000);
    frozen.child.kill("SIGSTOP");
    try {
      await release();
      const releaseBehind = await behindWaits;
      await releaseBehind();
    } finally {
      frozen.child.kill("SIGCONT");
    }
    const releaseFrozen = await frozenWaits;
    await releaseFrozen();
    expect(tickets(holder, key)).toEqual([]);
  });
});
