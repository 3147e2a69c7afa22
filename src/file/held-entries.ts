import type { AttemptOutcome, ExtendOutcome } from "../backend.js";
import { LockHandle } from "../backend.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import { toUnknown } from "../internal/release-func.js";
import type { ReleaseOutcome } from "../locker.js";
import type { Entry } from "./entry.js";
import type { Permit } from "./semaphore-files.js";
import type { FileStore } from "./store.js";

/** How long a release may take before it reports `"unknown"` (the entry then expires on its own). */
const RELEASE_TIMEOUT_MS = 5000;

const HELD: AttemptOutcome = { kind: "held" };

/**
 * Where a held entry lives, and the renames that keep, fence, hand off and free it: a lock's
 * directory, a read-write key's readers, a semaphore's weight directories (see `entry-places.ts`
 * and `SemaphoreFiles`). Each resolves `undefined` (or, for a release, not `"released"`) when the
 * entry is gone: taken over, or deleted.
 */
export interface EntryPlace {
  /** Moves the entry to a deadline `expiry` ms from now. */
  extend(hash: string, held: Permit, expiry: number): Promise<Entry | undefined>;
  /** Moves the entry to a deadline `expiry` ms from now, recording the fencing token `fence`. */
  fence(hash: string, held: Permit, expiry: number, fence: bigint): Promise<Entry | undefined>;
  /** Moves the entry to a deadline `expiry` ms from now, naming no process (a lease handed off). */
  detach(hash: string, held: Permit, expiry: number): Promise<Entry | undefined>;
  /** Removes the entry. */
  release(hash: string, held: Permit): Promise<"released" | "taken" | "expired">;
}

/** A lease held here: its key's hash, its permits' entry as it now is, and where that lives. */
export interface HeldEntry extends Permit {
  readonly hash: string;
  readonly place: EntryPlace;
  /** The entry, renamed by each extension. */
  entry: Entry;
  /** The extension in flight, if any: a release waits for it (it renames the entry). */
  extending?: Promise<Entry | undefined> | undefined;
}

/**
 * The leases the file backends hold here, by token: what `FileBackend` and `FileSemaphoreBackend`
 * do alike once an entry is taken — record it as a handle, fence it, extend it, hand it off and
 * release it, each through the entry's {@link EntryPlace}.
 */
export class HeldEntries {
  readonly #held = new Map<string, HeldEntry>();
  /**
   * The bound on releases ({@link RELEASE_TIMEOUT_MS}): one coarse timer for all of them while any
   * is in flight, not a timer set and cleared per release.
   */
  readonly #releaseDeadlines = new DeadlineGroup(RELEASE_TIMEOUT_MS, { inOrder: false });

  /** The lease held here with `token`, if any. */
  get(token: string): HeldEntry | undefined {
    return this.#held.get(token);
  }

  /** Records `held`, taken at `startedAt` for `duration` ms, as held here: its handle. */
  hold(resource: string, held: HeldEntry, startedAt: number, duration: number): LockHandle {
    this.#held.set(held.entry.token, held);
    return new LockHandle(held.entry.token, resource, startedAt, startedAt + duration);
  }

  /**
   * A grant that carries a fencing token: draws the key's next token from `store`, then confirms
   * the grant by recording the token in the entry, so that a holder that lost its entry meanwhile
   * gets none. A failure gives the entry back.
   */
  async holdFenced(resource: string, held: HeldEntry, duration: number, store: FileStore): Promise<AttemptOutcome> {
    const { hash, place } = held;
    let fencingToken: bigint;
    let confirmedAt: number;
    let confirmed: Entry | undefined;
    try {
      fencingToken = await store.nextFencingToken(hash);
      confirmedAt = performance.now();
      confirmed = await place.fence(hash, held, duration, fencingToken);
    } catch (error) {
      await place.release(hash, held).catch(() => undefined);
      throw error;
    }
    if (confirmed === undefined) return HELD;
    held.entry = confirmed;
    return { kind: "acquired", handle: this.hold(resource, held, confirmedAt, duration), fencingToken };
  }

  /** Extends each of `handles` (see `Backend.extend`). */
  extend(handles: readonly LockHandle[], duration: number): Promise<ExtendOutcome[]> {
    return Promise.all(handles.map((handle) => this.#extend(handle, duration)));
  }

  async #extend(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const held = this.#movable(handle);
    if (typeof held === "string") return held;
    const startedAt = performance.now();
    let next: Entry | undefined;
    try {
      held.extending = held.place.extend(held.hash, held, duration);
      next = await held.extending;
    } catch (error) {
      return asError(error);
    } finally {
      held.extending = undefined;
    }
    if (next === undefined) return lost(handle);
    // Ours until the new deadline. (After a loss declared meanwhile, a release still finds the entry.)
    held.entry = next;
    handle.renew(startedAt, startedAt + duration);
    return "extended";
  }

  /**
   * Extends `handle` once for a hand-off, with an entry that names no process (the one handing it
   * off may exit before it is adopted, and must not be judged dead for it), and forgets it here.
   */
  async detach(handle: LockHandle, duration: number): Promise<ExtendOutcome> {
    const held = this.#movable(handle);
    if (typeof held === "string") return held;
    const startedAt = performance.now();
    // An extension in flight moves the entry: detach the name it leaves. (This wait never rejects.)
    await held.extending?.catch(() => undefined);
    let next: Entry | undefined;
    try {
      next = await held.place.detach(held.hash, held, duration);
    } catch (error) {
      return asError(error);
    }
    if (next === undefined) return lost(handle);
    this.#held.delete(handle.token);
    handle.renew(startedAt, startedAt + duration);
    return "extended";
  }

  /** The lease of `handle`, to move: `"taken"` when it is not held here, `"expired"` past its deadline. */
  #movable(handle: LockHandle): HeldEntry | "taken" | "expired" {
    const held = this.#held.get(handle.token);
    if (held === undefined) return "taken";
    return performance.now() >= handle.validUntil ? "expired" : held;
  }

  /** Removes `handle`'s entry (see `Backend.release`); never rejects. */
  release(handle: LockHandle): Promise<ReleaseOutcome> {
    const held = this.#held.get(handle.token);
    if (held === undefined) return Promise.resolve("expired");
    this.#held.delete(handle.token);
    // Past the deadline it is expired, even when its entry was still there to delete.
    const expired = performance.now() >= handle.validUntil;
    const remove = (): Promise<ReleaseOutcome> =>
      this.#releaseDeadlines
        .run(held.place.release(held.hash, held), releaseTimedOut)
        .then((outcome) => (expired ? "expired" : outcome), toUnknown);
    // An extension in flight moves the entry: release the name it leaves (its own reaction, which
    // came first, has recorded it by then). None in flight: nothing to wait for.
    return held.extending === undefined ? remove() : held.extending.then(remove, remove);
  }
}

/** What a move of `handle`'s entry that found it gone answers: `"expired"` past its deadline, else `"taken"`. */
function lost(handle: LockHandle): "taken" | "expired" {
  return performance.now() >= handle.validUntil ? "expired" : "taken";
}

/** A failed move's outcome: `error` as an Error. */
function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** What a release that did not finish within {@link RELEASE_TIMEOUT_MS} rejects with. */
function releaseTimedOut(): Error {
  return new Error("release timed out");
}
