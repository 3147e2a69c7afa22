/** Internal building blocks whose behaviour the locker tests only reach indirectly. */
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { CloseGate } from "../../src/internal/abortable.js";
import { DeadlineGroup } from "../../src/internal/deadline-group.js";
import { ReleaseOnce } from "../../src/internal/release-func.js";
import { newToken } from "../../src/internal/token.js";
import { KeyStates, Waiter } from "../../src/internal/waiter.js";

const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

describe("newToken", () => {
  it("gives distinct 16-byte hex tokens across pool refills", () => {
    const tokens = Array.from({ length: 2000 }, () => newToken());
    for (const token of tokens) expect(token).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(tokens).size).toBe(tokens.length);
  });
});

describe("DeadlineGroup", () => {
  it("rejects what does not settle in time, passes through what does, and stops its timer", async () => {
    const before = timers();
    const group = new DeadlineGroup(20, { inOrder: false });
    const never = new Promise<never>(() => undefined);
    const late = group.run(never, () => new Error("too slow"));
    const quick = group.run(Promise.resolve(7), () => new Error("unexpected"));
    const failing = group.run(Promise.reject(new Error("own error")), () => new Error("unexpected"));
    expect(await quick).toBe(7);
    await expect(failing).rejects.toThrow("own error");
    await expect(late).rejects.toThrow("too slow");
    // Its interval is stopped: no more timers than before (another test's may have ended meanwhile).
    expect(timers()).toBeLessThanOrEqual(before);
  });

  it("does not count a stall of this process's event loop against the timeout", async () => {
    const group = new DeadlineGroup(50, { inOrder: false });
    let answer: (value: string) => void = () => undefined;
    const pending = group.run(new Promise<string>((resolve) => (answer = resolve)), () => new Error("timed out"));
    // 300 ms of synchronous work (six timeouts): no reply could have been read meanwhile.
    const until = performance.now() + 300;
    while (performance.now() < until) Math.sqrt(until);
    setImmediate(() => answer("answered after the stall"));
    expect(await pending).toBe("answered after the stall");
  });

  it("in order: keeps an operation pending while the server answers the ones before it, and fails it once all is silent", async () => {
    const group = new DeadlineGroup(100, { inOrder: true });
    const resolvers: Array<() => void> = [];
    const operations = Array.from({ length: 16 }, (_, index) =>
      group.run(
        new Promise<number>((resolve) => resolvers.push(() => resolve(index))),
        () => new Error(`#${index} timed out`),
      ),
    );
    // The server answers one operation every 20 ms: 12 answers take more than two timeouts, and
    // none of the operations may time out while answers keep coming.
    for (let index = 0; index < 12; index++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      resolvers[index]?.();
    }
    // Then the server falls silent: the other four time out.
    const outcomes = await Promise.allSettled(operations);
    expect(outcomes.map((outcome) => (outcome.status === "fulfilled" ? outcome.value : "timed out"))).toEqual([
      ...[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
      ...Array(4).fill("timed out"),
    ]);
  });

  it("not in order (a Cluster): other servers' answers do not keep a silent one's operation pending", async () => {
    const group = new DeadlineGroup(40, { inOrder: false });
    const silent = group
      .run(new Promise<never>(() => undefined), () => new Error("silent server"))
      .catch((error: Error) => error.message);
    const answered: Promise<number>[] = [];
    for (let index = 0; index < 8; index++) {
      await new Promise((resolve) => setTimeout(resolve, 15));
      answered.push(group.run(Promise.resolve(index), () => new Error("unexpected")));
    }
    expect(await silent).toBe("silent server");
    expect(await Promise.all(answered)).toHaveLength(8);
  });

  it("turns a rejection (never a timeout) into what onError returns, or rejects with what it throws", async () => {
    const group = new DeadlineGroup(30, { inOrder: false });
    const seen: unknown[] = [];
    const fallback = (error: unknown): Promise<string> => {
      seen.push(error);
      return Promise.resolve("fell back");
    };
    const missed = new Error("NOSCRIPT");
    expect(await group.run(Promise.reject(missed), () => new Error("unexpected"), undefined, fallback)).toBe(
      "fell back",
    );
    expect(seen).toEqual([missed]);
    const rethrown = group.run(
      Promise.reject(new Error("other")),
      () => new Error("unexpected"),
      undefined,
      () => {
        throw new Error("not a miss");
      },
    );
    await expect(rethrown).rejects.toThrow("not a miss");
    // An answer that comes after the timeout changes nothing: the fallback is not started.
    let fail: (error: Error) => void = () => undefined;
    const late = group.run(
      new Promise<string>((_, reject) => (fail = reject)),
      () => new Error("timed out"),
      undefined,
      fallback,
    );
    await expect(late).rejects.toThrow("timed out");
    fail(new Error("late NOSCRIPT"));
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(seen).toEqual([missed]);
  });
});

describe("CloseGate", () => {
  it("cuts pending races short on close, and refuses new ones", async () => {
    const gate = new CloseGate();
    const reason = new Error("closed");
    const pending = gate.race(new Promise<never>(() => undefined), undefined);
    gate.close(reason);
    await expect(pending).rejects.toBe(reason);
    await expect(gate.race(Promise.resolve(1), undefined)).rejects.toBe(reason);
  });

  it("rejects with the signal's reason and leaves no listener", async () => {
    const gate = new CloseGate();
    const controller = new AbortController();
    const pending = gate.race(new Promise<never>(() => undefined), controller.signal);
    controller.abort();
    await expect(pending).rejects.toBe(controller.signal.reason);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    const done = new AbortController();
    expect(await gate.race(Promise.resolve("ok"), done.signal)).toBe("ok");
    expect(getEventListeners(done.signal, "abort")).toHaveLength(0);
  });
});

describe("KeyStates", () => {
  it("counts keys only held without a state object, and opens one with the count when needed", () => {
    const keys = new KeyStates();
    keys.hold("a");
    keys.hold("a");
    expect(keys.heldCount("a")).toBe(2);
    expect(keys.get("a")).toBeUndefined();
    const state = keys.open("a");
    expect(state.held).toBe(2);
    expect(keys.get("a")).toBe(state);
    const waiter = new Waiter();
    state.waiters.push(waiter);
    keys.unhold("a");
    keys.unhold("a");
    expect(keys.heldCount("a")).toBe(0);
    expect(state.idle).toBe(false); // still waited for
    keys.leave("a", state, waiter, false);
    expect(state.idle).toBe(true);
    keys.hold("a");
    expect(state.idle).toBe(false);
    expect(keys.heldCount("a")).toBe(1);
  });

  it("settles a state whose key is only held back into a count, once the locker has many keys", () => {
    const keys = new KeyStates();
    const few = keys.open("few");
    keys.hold("few");
    keys.settle("few", few);
    // Few keys: the state stays, for the key's next lock.
    expect(keys.get("few")).toBe(few);
    for (let i = 0; i < 1100; i++) keys.hold(`held-${i}`);
    keys.settle("few", few);
    expect(keys.get("few")).toBeUndefined();
    expect(keys.heldCount("few")).toBe(1);
    keys.unhold("few");
    expect(keys.heldCount("few")).toBe(0);
    // Kept while anyone waits, a grant is pending, or the key was waited for.
    const waited = keys.open("waited");
    keys.hold("waited");
    waited.waitedAt = 1;
    keys.settle("waited", waited);
    const queued = keys.open("queued");
    keys.hold("queued");
    const waiter = new Waiter();
    queued.waiters.push(waiter);
    keys.settle("queued", queued);
    const registered = keys.open("registered");
    keys.hold("registered");
    registered.registration = { token: "t", weight: 1, sentAt: 0, serverMs: 0 };
    keys.settle("registered", registered);
    const free = keys.open("free");
    keys.settle("free", free);
    expect([keys.get("waited"), keys.get("queued"), keys.get("registered"), keys.get("free")]).toEqual([
      waited,
      queued,
      registered,
      free,
    ]);
  });

  it("keeps a released key as an idle count, and purges idle entries once they outnumber busy ones", () => {
    const keys = new KeyStates();
    keys.hold("k");
    keys.unhold("k");
    expect(keys.heldCount("k")).toBe(0);
    keys.hold("k");
    expect(keys.heldCount("k")).toBe(1);
    keys.unhold("k");
    for (let i = 0; i < 2000; i++) keys.hold(`busy-${i}`);
    for (let i = 0; i < 2000; i++) keys.unhold(`busy-${i}`);
    // The purge ran: a waiter's notification finds no state, a fresh hold counts from zero.
    keys.notifyHead("k");
    keys.notifyAllHeads();
    keys.hold("busy-0");
    expect(keys.heldCount("busy-0")).toBe(1);
  });
});

describe("release functions", () => {
  it("are their own async disposer (inherited, not an own property) and release once", async () => {
    let runs = 0;
    const { release } = new ReleaseOnce(() => {
      runs += 1;
      return "released";
    });
    expect(release[Symbol.asyncDispose]).toBe(release);
    expect(Object.hasOwn(release, Symbol.asyncDispose)).toBe(false);
    expect(typeof release).toBe("function");
    {
      await using _disposed = release;
    }
    await release();
    expect(runs).toBe(1);
  });
});
