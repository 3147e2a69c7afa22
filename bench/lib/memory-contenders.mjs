/**
 * In-process lockers under test, behind one interface: `create()` gives
 * `{ lock(key) → Promise<release> }`; `release()` may return a promise or not (callers await it).
 */
import { Mutex } from "async-mutex";
import { MemoryLocker } from "globallock";
import { SpinLocker, TICK_MS } from "./spin-locker.mjs";

/**
 * @typedef {{ lock(key: string): Promise<() => unknown> }} MemoryLock
 * @typedef {{ id: string, label: string, slow?: boolean, create(): MemoryLock }} MemoryContender
 */

/** @type {MemoryContender} */
export const memoryLocker = {
  id: "MemoryLocker",
  label: "globallock MemoryLocker",
  create() {
    const locker = new MemoryLocker();
    return { lock: (key) => locker.lock(undefined, key) };
  },
};

/**
 * async-mutex with one Mutex per key, created on first use and kept in a Map (never deleted,
 * which favours it slightly: no per-lock allocation).
 * @type {MemoryContender}
 */
export const asyncMutex = {
  id: "async-mutex",
  label: "async-mutex (one Mutex per key, in a Map)",
  create() {
    const mutexes = new Map();
    return {
      lock(key) {
        let mutex = mutexes.get(key);
        if (mutex === undefined) {
          mutex = new Mutex();
          mutexes.set(key, mutex);
        }
        return mutex.acquire();
      },
    };
  },
};

/** @type {MemoryContender} */
export const spinLock = {
  id: "spin-100ms",
  label: `spin lock, ${TICK_MS} ms tick (Gitea's shape)`,
  slow: true,
  create() {
    const locker = new SpinLocker();
    return { lock: (key) => locker.lock(key) };
  },
};

export const MEMORY_CONTENDERS = [memoryLocker, asyncMutex, spinLock];
