import type { BackendEvents, ReleaseWatcher } from "../backend.js";
import { getOrInsert } from "../internal/get-or-insert.js";

/**
 * The table lockers of this process, by database (a pool, or an SQLite file) and then by table:
 * the lockers that can hear each other's releases at once. Nothing crosses processes — a lease
 * table has no way to notify (LISTEN/NOTIFY does not pass a transaction pooler): a waiter in
 * another process finds a release at its next poll.
 */
const buses = new Map<unknown, Map<string, Set<TableWatcher>>>();

/**
 * How a table locker hears releases: from the other table lockers of this process on the same
 * database and table, synchronously, as they release or give up a place in a key's queue.
 * Subscribing sends nothing; {@link isWatching} is true while this process's releases of the key
 * are heard (other processes' are found by polling).
 */
export class TableWatcher implements ReleaseWatcher {
  readonly #watched = new Map<string, number>();
  readonly #lockers: Set<TableWatcher>;
  readonly #database: unknown;
  readonly #table: string;
  readonly #prefix: string;
  readonly #events: BackendEvents;
  readonly #onClose: () => Promise<void>;
  #closed = false;

  /**
   * @param database what identifies the database in this process (a pool, a file's path).
   * @param table the lease table.
   * @param prefix the locker's prefix: a name heard is its key after the prefix.
   * @param events where releases are told.
   * @param onClose the backend's own close.
   */
  constructor(database: unknown, table: string, prefix: string, events: BackendEvents, onClose: () => Promise<void>) {
    this.#database = database;
    this.#table = table;
    this.#prefix = prefix;
    this.#events = events;
    this.#onClose = onClose;
    const tables = getOrInsert(buses, database, () => new Map());
    const lockers = getOrInsert(tables, table, () => new Set());
    lockers.add(this);
    this.#lockers = lockers;
  }

  watch(resource: string): Promise<void> {
    this.#watched.set(resource, (this.#watched.get(resource) ?? 0) + 1);
    return Promise.resolve();
  }

  unwatch(resource: string): void {
    const count = this.#watched.get(resource) ?? 0;
    if (count <= 1) this.#watched.delete(resource);
    else this.#watched.set(resource, count - 1);
  }

  isWatching(resource: string): boolean {
    return this.#watched.has(resource);
  }

  /** Tells the other lockers of this process on the table that `name` may have room now. */
  publish(name: string): void {
    for (const locker of this.#lockers) if (locker !== this) locker.#hear(name);
  }

  #hear(name: string): void {
    if (this.#watched.has(name)) this.#events.released(name.slice(this.#prefix.length));
  }

  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#lockers.delete(this);
      if (this.#lockers.size === 0) {
        const tables = buses.get(this.#database);
        tables?.delete(this.#table);
        if (tables?.size === 0) buses.delete(this.#database);
      }
    }
    await this.#onClose();
  }
}
