/**
 * The parts of a `memcached` (npm, 2.x) client the Memcached locker uses, written out structurally
 * so that the package's declarations import nothing from `memcached` (a `Memcached` instance fits
 * them). Every command answers through a Node-style callback; a command the client cannot send
 * (a server it counts as failed, a connection it could not open) answers with an error, and one
 * whose connection closes under it may never answer at all (the locker bounds every command).
 */

/** A command's callback: `error` is an Error (or an array of them), `result` the command's answer. */
export type MemcachedCallback<T> = (error: unknown, result: T) => void;

/** A `memcached` client (`new Memcached(location, options)`), created, owned and ended by the caller. */
export interface MemcachedClient {
  /**
   * The server locations the client hashes keys over (`"host:port"`): a `Memcached` has them,
   * though its published types leave them out.
   */
  readonly servers?: readonly string[];
  /** Put before every key by the client itself (its `namespace` option; `""` by default). */
  readonly namespace?: string;
  /** Stores `value` under `key` for `lifetime` seconds unless the key exists (NOT_STORED: an Error with `notStored`). */
  add(key: string, value: string, lifetime: number, callback: MemcachedCallback<boolean>): void;
  /** Reads `key`: its value, or `undefined` when it is absent. */
  get(key: string, callback: MemcachedCallback<unknown>): void;
  /** Reads several keys at once: an object of the keys found. */
  getMulti(keys: string[], callback: MemcachedCallback<Record<string, unknown> | undefined>): void;
  /** Reads `key` with its CAS unique: `{ [key]: value, cas }`, or `undefined` when it is absent. */
  gets(key: string, callback: MemcachedCallback<Record<string, unknown> | undefined>): void;
  /**
   * Stores `value` under `key` for `lifetime` seconds if its CAS unique is still `cas`: `true`
   * when stored; `false` when it changed or is gone. A negative lifetime stores it expired: a
   * compare-and-delete.
   */
  cas(key: string, value: string, cas: string, lifetime: number, callback: MemcachedCallback<boolean>): void;
  /** `stats` of every server: one object per server (numbers as numbers). */
  stats(callback: MemcachedCallback<ReadonlyArray<Record<string, unknown>>>): void;
  /** `stats settings` of every server: one object per server. */
  settings(callback: MemcachedCallback<ReadonlyArray<Record<string, unknown>>>): void;
}
