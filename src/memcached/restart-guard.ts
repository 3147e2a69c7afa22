import { performance } from "node:perf_hooks";
import type { MemcachedCommands } from "./commands.js";
import { type KeyNames, ttlSecondsOf } from "./layout.js";

/** What the guard says of a server that just stored a lock: take it, or not until `retryAfterMs`. */
export type GuardAnswer = { readonly open: true } | { readonly open: false; readonly retryAfterMs: number };

const OPEN: GuardAnswer = { open: true };

/** The epoch item's value (its presence is what counts). */
const EPOCH_VALUE = "gl1-epoch";

/**
 * Keeps a server that lost its items — restarted (Memcached keeps nothing on disk), flushed
 * (`flush_all`) — from granting a lock its earlier holder still believes it holds: that holder is
 * told at its next extension, up to a lease later, and until then two holders would work at once.
 * As Redlock's delayed restart, the server grants nothing under the prefix for a lease's length
 * after the loss is found.
 *
 * Every lock just stored is checked against two items of the prefix, read in one `get` after the
 * `add` (so on the server that stored it, after it stored it):
 *
 * - `epoch`, with no TTL: present while the server has kept every item since a locker wrote it.
 * - `restarted`, with the TTL of a lease: present for a lease after a locker found `epoch` gone.
 *
 * `epoch` present and `restarted` absent: the lock holds. `epoch` gone: the first locker to see it
 * writes `restarted`, then `epoch` (in that order: nobody finds `epoch` back before `restarted`),
 * and every lock of the prefix stored until `restarted` runs out is deleted again unheld. A server
 * that starts for the first time is one that lost its items too: the first lock on it waits a
 * lease. Memcached may also evict `epoch` (it is read with every lock, so it stays recent in the
 * LRU): that costs a lease of waiting, never a second holder.
 */
export class RestartGuard {
  readonly #commands: MemcachedCommands;
  readonly #names: KeyNames;
  /** `performance.now()` until which the prefix is known closed here: attempts send nothing. */
  #closedUntil = 0;

  constructor(commands: MemcachedCommands, names: KeyNames) {
    this.#commands = commands;
    this.#names = names;
  }

  /** For how long (ms) this locker knows the prefix closed, without asking (`undefined`: not known closed). */
  knownClosed(): number | undefined {
    const left = this.#closedUntil - performance.now();
    return left > 0 ? Math.ceil(left) : undefined;
  }

  /**
   * Whether a lock the server just stored may be held; `leaseMs` is the longest lease a holder may
   * have believed in when the server lost its items (this locker's longest). Rejects with a
   * StoreUnavailableError when the server does not answer.
   */
  async check(leaseMs: number): Promise<GuardAnswer> {
    const { epoch, restarted } = this.#names;
    const found = await this.#commands.getMulti([epoch, restarted]);
    const closedUntil = found[restarted];
    if (found[epoch] !== undefined && closedUntil === undefined) return OPEN;
    const ttl = ttlSecondsOf(leaseMs);
    if (found[epoch] === undefined) {
      await this.#commands.add(restarted, String(Date.now() + ttl * 1000), ttl);
      await this.#commands.add(epoch, EPOCH_VALUE, 0);
    }
    // The item's end by its writer's clock, if readable and plausible; else its whole TTL.
    const end = Number(closedUntil) - Date.now();
    const retryAfterMs = Number.isFinite(end) && end > 0 && end <= ttl * 1000 ? Math.ceil(end) : ttl * 1000;
    this.#closedUntil = performance.now() + retryAfterMs;
    return { open: false, retryAfterMs };
  }
}
