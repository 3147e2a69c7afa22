import type { ReleaseWatcher } from "../../src/backend.js";

/**
 * The fake store's release watcher: subscriptions are confirmed at once and counted per resource,
 * so a test can see that every waiter that watched a key unwatched it (nothing left behind) and
 * that nothing is watched after close. Releases are announced by the test (see
 * `FakeBackend.emitReleased`), not by the watcher.
 */
export class FakeWatcher implements ReleaseWatcher {
  /** Every `watch` and `unwatch`, in order. */
  readonly log: Array<{ readonly op: "watch" | "unwatch"; readonly resource: string }> = [];
  /** Subscriptions that do not pair up (an unwatch without a watch, a watch after close). */
  readonly violations: string[] = [];
  readonly #counts = new Map<string, number>();
  #closed = false;

  /** True once the core closed it (the last step of its close). */
  get closed(): boolean {
    return this.#closed;
  }

  /** References held on `resource` now. */
  count(resource: string): number {
    return this.#counts.get(resource) ?? 0;
  }

  /** References held on every resource now. */
  get total(): number {
    let total = 0;
    for (const count of this.#counts.values()) total += count;
    return total;
  }

  watch(resource: string): Promise<void> {
    this.log.push({ op: "watch", resource });
    if (this.#closed) this.violations.push(`watch of ${resource} after close`);
    this.#counts.set(resource, this.count(resource) + 1);
    return Promise.resolve();
  }

  unwatch(resource: string): void {
    this.log.push({ op: "unwatch", resource });
    const count = this.count(resource);
    if (count === 0) this.violations.push(`unwatch of ${resource} without a watch`);
    if (count <= 1) this.#counts.delete(resource);
    else this.#counts.set(resource, count - 1);
  }

  isWatching(resource: string): boolean {
    return this.count(resource) > 0;
  }

  close(): Promise<void> {
    this.#closed = true;
    return Promise.resolve();
  }
}
