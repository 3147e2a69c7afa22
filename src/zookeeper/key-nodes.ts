import { performance } from "node:perf_hooks";
import type { ZooKeeperCalls } from "./calls.js";

/**
 * How long a key's node stays once this locker left it (ms): a key locked again within that time
 * needs no create of its node, and an idle one does not stay for long.
 */
export const KEY_NODE_IDLE_MS = 2000;

/**
 * The key nodes of a ZooKeeper locker: those it knows are there (a join of its own made a node
 * under them), so that its next join sends no create of the key's node; and when each goes. A key
 * left by this locker (a release, a waiter gone, a try that missed) has its node deleted once
 * nothing of this locker used it for {@link KEY_NODE_IDLE_MS}: one timer, set for the earliest of
 * those deadlines. The delete is guarded: it fails harmlessly on a node that has children (another
 * node holds or waits there) or is gone. Once the locker closes, every key node it knows or was to
 * delete goes at once, and so does every key it leaves afterwards.
 *
 * Another process may delete a key node this one knows (its own drop, once the key was empty): a
 * join there then fails with NO_NODE, makes the key's node and tries again (see `NodeJoiner`).
 */
export class KeyNodes {
  readonly #calls: ZooKeeperCalls;
  /** Keeps a delete under way (the janitor's tracking: close waits for it). */
  readonly #track: (operation: Promise<unknown>) => void;
  /** Key nodes known there: a node of this locker's was made under each since it was last dropped. */
  readonly #known = new Set<string>();
  /**
   * Key nodes to delete, each with its deadline (`performance.now()`). Every deadline is the same
   * delay after it was set, and setting one moves its entry to the end: so the map is in deadline
   * order, the earliest first.
   */
  readonly #drops = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(calls: ZooKeeperCalls, track: (operation: Promise<unknown>) => void) {
    this.#calls = calls;
    this.#track = track;
  }

  /** Whether `keyNode` is known there. A join about to use it calls this: its pending delete is off. */
  use(keyNode: string): boolean {
    this.#drops.delete(keyNode);
    return this.#known.has(keyNode);
  }

  /** A node of this locker's was just made under `keyNode`: it is there. */
  found(keyNode: string): void {
    this.#known.add(keyNode);
  }

  /** `keyNode` was found gone (someone deleted it): the next join makes it again. */
  lost(keyNode: string): void {
    this.#known.delete(keyNode);
  }

  /** This locker left `keyNode`: it goes once idle for the delay (at once, after close). */
  leave(keyNode: string): void {
    if (this.#closed) {
      this.#drop(keyNode);
      return;
    }
    this.#drops.delete(keyNode);
    this.#drops.set(keyNode, performance.now() + KEY_NODE_IDLE_MS);
    this.#arm();
  }

  /** Stops the timer and deletes every key node known or due to go (those with children stay). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    const all = new Set([...this.#known, ...this.#drops.keys()]);
    this.#drops.clear();
    for (const keyNode of all) this.#drop(keyNode);
  }

  /** Sets the timer for the earliest deadline, unless it is set (it sets itself again when it fires). */
  #arm(): void {
    if (this.#timer !== undefined) return;
    const earliest = this.#drops.values().next();
    if (earliest.done === true) return;
    this.#timer = setTimeout(this.#onTimer, Math.max(0, earliest.value - performance.now()));
    // An idle key's node is no reason to keep the process up: should it exit first, the node stays
    // (empty, harmless) until a locker leaves that key again.
    this.#timer.unref();
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined;
    const now = performance.now();
    for (const [keyNode, deadline] of this.#drops) {
      if (deadline > now) break;
      this.#drops.delete(keyNode);
      this.#drop(keyNode);
    }
    this.#arm();
  };

  /** Deletes `keyNode` if it is empty (a failure, NOT_EMPTY or NO_NODE, changes nothing: ignored). */
  #drop(keyNode: string): void {
    this.#known.delete(keyNode);
    this.#track(this.#calls.bound(this.#calls.sendRemove(keyNode)));
  }
}
