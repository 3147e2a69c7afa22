/**
 * FileLocker's waiting queue across real processes (see src/file/lock-queue.ts): waiters are
 * served in arrival order, and a waiter that is killed or frozen while queued holds up those behind
 * it no longer than its ticket lasts (a killed one: until the next look, which finds it dead); a
 * frozen one whose ticket lapsed queues again behind those who came meanwhile.
 */
import { readdirSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { takeable } from "../../src/file/entry.js";
import { ticketEntry } from "../../src/file/permits.js";
import { FileLocker } from "../../src/index.js";
import { assertBuilt } from "../helpers/cli.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { RemoteFileLocker } from "../helpers/remote-locker.js";
import { eventually, sleep } from "../helpers/wait.js";

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

async function child(options: { backoffMin?: number; backoffMax?: number } = {}): Promise<RemoteFileLocker> {
  const { backoffMin = 20, backoffMax } = options;
  const backoff = backoffMax === undefined ? {} : { backoff: { min: backoffMin, max: backoffMax } };
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

/** Whether the ticket `name` has lapsed (its deadline passed: whoever reads the queue removes it). */
function lapsed(name: string): boolean {
  const entry = ticketEntry(name);
  return entry !== undefined && takeable(entry);
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

  it("a head waiter frozen past its ticket's lapse queues again behind those who came meanwhile", async () => {
    const key = "frozen-head";
    const holder = here();
    const release = await holder.lock(undefined, key);
    // The frozen one's ticket lasts 3 × 500 ms + 1 s, and it polls every 250–500 ms: stopped as its
    // ticket appears, it is stopped right after the read that found it first in line. b and c come
    // meanwhile; their tickets last 3 × 5 s + 1 s, longer than they are stopped below.
    const [frozen, b, c] = await Promise.all([
      child({ backoffMin: 500, backoffMax: 500 }),
      child({ backoffMax: 5000 }),
      child({ backoffMax: 5000 }),
    ]);
    /** Who got the key, in turn (each gives it back at once). */
    const order: string[] = [];
    const serve = (name: string, locker: RemoteFileLocker): Promise<void> => {
      const served = locker.lock(AbortSignal.timeout(25_000), key).then((releaseIt) => {
        order.push(name);
        return releaseIt();
      });
      served.catch(() => undefined);
      return served;
    };
    const frozenServed = serve("frozen", frozen);
    await eventually(() => tickets(holder, key).length === 1);
    frozen.child.kill("SIGSTOP");
    try {
      const [frozenTicket] = tickets(holder, key) as [string];
      await eventually(() => lapsed(frozenTicket), 20_000);
      // b's read of the queue removes the lapsed ticket: b is first in line, c behind it.
      const bServed = serve("b", b);
      await eventually(() => {
        const queue = tickets(holder, key);
        return queue.length === 1 && queue[0] !== frozenTicket;
      });
      const cServed = serve("c", c);
      await eventually(() => tickets(holder, key).length === 2);
      // b and c are stopped across the release, so the key is free when the frozen one resumes
      // (else b takes it within a few ms of the release, before the frozen one is back).
      b.child.kill("SIGSTOP");
      c.child.kill("SIGSTOP");
      await release();
      frozen.child.kill("SIGCONT");
      // It queues again (a third ticket), or takes the key ahead of b and c.
      await eventually(() => tickets(holder, key).length === 3 || order.length > 0, 20_000);
      b.child.kill("SIGCONT");
      c.child.kill("SIGCONT");
      await Promise.all([frozenServed, bServed, cServed]);
    } finally {
      for (const stopped of [frozen, b, c]) stopped.child.kill("SIGCONT");
    }
    expect(order).toEqual(["b", "c", "frozen"]);
    expect(tickets(holder, key)).toEqual([]);
  });
});
