import { StoreUnavailableError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import type { MemcachedCallback, MemcachedClient } from "./types.js";

/** An item read with its CAS unique. */
export interface CasRead {
  /** The item's value (a string, for the locker's own items). */
  readonly value: unknown;
  /** Its CAS unique: a `cas` with it lands only while nobody wrote the item since. */
  readonly cas: string;
}

/**
 * The Memcached commands a locker sends, as promises, each bounded by the operation timeout:
 * the `memcached` client never answers a command whose connection closed under it, and may hold
 * one back for a connection for as long as its own retry settings say. A failure or a timeout is
 * a StoreUnavailableError naming the item.
 */
export class MemcachedCommands {
  readonly #client: MemcachedClient;
  readonly #timeoutMs: number;
  /** Commands go over several pooled connections (and servers): none's answer says others are alive. */
  readonly #deadlines: DeadlineGroup;

  constructor(client: MemcachedClient, timeoutMs: number) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
    this.#deadlines = new DeadlineGroup(timeoutMs, { inOrder: false });
  }

  /**
   * Stores `value` under `key` for `ttl` seconds unless it exists: `true` when stored, `false`
   * when it exists. `late` hears whether an answer that came after the timeout stored it.
   */
  add(key: string, value: string, ttl: number, late?: (stored: boolean) => void): Promise<boolean> {
    return this.#run(
      key,
      (done) =>
        this.#client.add(key, value, ttl, (error, stored) => {
          if (isNotStored(error)) done(undefined, false);
          else if (error === undefined && stored !== true) done(new Error("Memcached did not store the item"), false);
          else done(error, stored);
        }),
      late,
    );
  }

  /** The value of `key`, or `undefined` when it is absent. */
  get(key: string): Promise<unknown> {
    return this.#run(key, (done) => this.#client.get(key, done));
  }

  /** The values of `keys` found, by key (one command per server). */
  getMulti(keys: readonly string[]): Promise<Record<string, unknown>> {
    return this.#run(keys[0] ?? "", (done) =>
      this.#client.getMulti([...keys], (error, found) => done(error, found ?? {})),
    );
  }

  /** The value of `key` and its CAS unique, or `undefined` when it is absent. */
  async gets(key: string): Promise<CasRead | undefined> {
    const found = await this.#run<Record<string, unknown> | undefined>(key, (done) => this.#client.gets(key, done));
    if (found === undefined || typeof found !== "object") return undefined;
    const cas = found.cas;
    // The client names the value by the key with its namespace: the one property that is not `cas`.
    const name = Object.keys(found).find((property) => property !== "cas");
    return name === undefined || typeof cas !== "string" ? undefined : { value: found[name], cas };
  }

  /**
   * Writes `value` under `key` for `ttl` seconds (a negative `ttl`: deletes it) if its CAS unique
   * is still `cas`: `false` when it changed or is gone.
   */
  cas(key: string, value: string, cas: string, ttl: number): Promise<boolean> {
    return this.#run(key, (done) =>
      this.#client.cas(key, value, cas, ttl, (error, stored) => done(error, stored === true)),
    );
  }

  /** Sends one command and bounds it; `late` hears an answer that came after the timeout. */
  #run<T>(key: string, send: (done: MemcachedCallback<T>) => void, late?: (result: T) => void): Promise<T> {
    let timedOut = false;
    const answer = new Promise<T>((resolve, reject) => {
      send((error, result) => {
        if (error !== undefined && error !== null) reject(error);
        else resolve(result);
      });
    });
    if (late !== undefined) answer.then((result) => timedOut && late(result), ignore);
    return this.#deadlines.run(
      answer,
      () => {
        timedOut = true;
        return unavailable(key, new Error(`Memcached did not answer within ${this.#timeoutMs} ms`));
      },
      undefined,
      (error) => {
        throw unavailable(key, error);
      },
    );
  }
}

/** Whether `error` is the client's NOT_STORED (an `add` of a key that exists). */
function isNotStored(error: unknown): boolean {
  return error instanceof Error && (error as Error & { notStored?: boolean }).notStored === true;
}

/** A failed Memcached command about `key`: a StoreUnavailableError with the error as its cause. */
export function unavailable(key: string, error: unknown): StoreUnavailableError {
  return new StoreUnavailableError(key, `Memcached failed on "${key}": ${describe(error)}`, { cause: error });
}

/** The client's error in words: an Error's message, each of an array's, or the value. */
function describe(error: unknown): string {
  if (Array.isArray(error)) return error.map(describe).join("; ");
  return error instanceof Error ? error.message : String(error);
}

function ignore(): void {}
