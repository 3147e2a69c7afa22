/**
 * Where the leases of the file lockers live (see {@link EntryPlace}): a lock's entry in `H.lock`,
 * and a reader's in a read-write key's `H.rd`. (A semaphore's permits live in `SemaphoreFiles`.)
 */
import type { Entry } from "./entry.js";
import { moveEntry } from "./entry-moves.js";
import type { EntryPlace } from "./held-entries.js";
import type { PermitFiles } from "./permits.js";
import type { Permit } from "./semaphore-files.js";
import type { FileStore } from "./store.js";

/** A lock's entry, the one entry of the key's lock directory `H.lock` (see `store.ts`). */
export class LockPlace implements EntryPlace {
  readonly #store: FileStore;

  constructor(store: FileStore) {
    this.#store = store;
  }

  extend(hash: string, held: Permit, expiry: number): Promise<Entry | undefined> {
    return this.#store.extend(hash, held.entry, expiry);
  }

  fence(hash: string, held: Permit, expiry: number, fence: bigint): Promise<Entry | undefined> {
    return this.#store.extend(hash, held.entry, expiry, fence);
  }

  detach(hash: string, held: Permit, expiry: number): Promise<Entry | undefined> {
    const store = this.#store;
    return store.run(true, () =>
      moveEntry(store, store.lockPath(hash), held.entry, expiry, "hand off a lease in", held.entry.fence, true),
    );
  }

  release(hash: string, held: Permit): Promise<"released" | "taken" | "expired"> {
    return this.#store.release(hash, held.entry);
  }
}

/** A reader's entry, among the readers of a read-write key in `H.rd` (see `permits.ts`). */
export class ReaderPlace implements EntryPlace {
  readonly #store: FileStore;
  readonly #permits: PermitFiles;

  constructor(store: FileStore, permits: PermitFiles) {
    this.#store = store;
    this.#permits = permits;
  }

  extend(hash: string, held: Permit, expiry: number): Promise<Entry | undefined> {
    return this.#permits.extendRead(hash, held.entry, expiry);
  }

  /** Readers are not fenced (a fencing token needs an exclusive holder): never asked. */
  fence(): Promise<Entry | undefined> {
    return Promise.reject(new Error("a reader's lease carries no fencing token"));
  }

  detach(hash: string, held: Permit, expiry: number): Promise<Entry | undefined> {
    const store = this.#store;
    const dir = this.#permits.readersPath(hash);
    return store.run(true, () =>
      moveEntry(store, dir, held.entry, expiry, "hand off a lease in", held.entry.fence, true),
    );
  }

  release(hash: string, held: Permit): Promise<"released" | "taken" | "expired"> {
    return this.#permits.releaseRead(hash, held.entry);
  }
}
