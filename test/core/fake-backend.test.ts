/**
 * The test bed's own check: the scripted store notices a broken promise of the core to a backend.
 * Driven directly, without a core, doing what a core must never do — so a detector that quietly
 * stopped working cannot make the core's tests pass for the wrong reason.
 */
import { describe, expect, it } from "vitest";
import type { AttemptRequest, LockHandle } from "../../src/backend.js";
import { FakeBackend } from "./fake-backend.js";

/** An attempt on `resource` as the core would ask for it. */
function attempt(resource: string): AttemptRequest {
  return {
    resource,
    duration: 60_000,
    queueing: { waiterId: "w", joinOnMiss: false, leaveOnSuccess: false },
    fencing: false,
    weight: 1,
  };
}

/** A store attached to a core that ignores its events. */
function detachedStore(): FakeBackend {
  const store = new FakeBackend();
  store.attach({ waiterId: "w", owner: "bed", events: { released() {}, granted() {}, missed() {}, lost() {} } });
  return store;
}

describe("core test bed: the fake store", () => {
  it("notes an attempt on a key its core holds, and an extension of a released lease", async () => {
    const store = detachedStore();
    const resource = store.resourceOf("k");
    const outcome = await store.acquire(attempt(resource));
    expect(outcome.kind).toBe("acquired");
    expect(store.violations).toEqual([]);
    expect((await store.acquire(attempt(resource))).kind).toBe("held");
    expect(store.violations).toHaveLength(1);
    const { handle } = outcome as { handle: LockHandle };
    expect(await store.release(handle)).toBe("released");
    await store.extend([handle], 60_000);
    expect(store.violations).toHaveLength(2);
    expect(store.maxInFlight.get(resource)).toBe(1);
  });

  it("answers from its script first, then from its table; a dropped key extends as taken", async () => {
    const store = detachedStore();
    const resource = store.resourceOf("k");
    store.script.acquire.push("expired-on-arrival");
    expect((await store.acquire(attempt(resource))).kind).toBe("expired-on-arrival");
    const outcome = await store.acquire(attempt(resource));
    const { handle } = outcome as { handle: LockHandle };
    expect(store.holderOf("k")).toBe(handle.token);
    store.drop("k");
    expect(await store.extend([handle], 60_000)).toEqual(["taken"]);
    expect(store.violations).toEqual([]);
  });
});
