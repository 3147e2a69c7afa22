import { performance } from "node:perf_hooks";
import type { AttemptRequest, Registration } from "../backend.js";
import type { EtcdCommands } from "./etcd-commands.js";
import { directoryOf, entryKey, entryValue, freshToken, type KeyDirectory } from "./layout.js";
import type { LeaseRecord } from "./leases.js";
import { fits, rangeIn, rangeOf, rangeRevision, total } from "./ranges.js";

/** Optimistic rounds of an attempt that does not queue before it gives up as "held" (see {@link EntryAttempts}). */
const FIT_ROUNDS = 3;

/**
 * An attempt's entry found holding: its lease, key and value, its token, when the attempt was
 * sent, its create revision (the fencing token) and a revision at which etcd had it.
 */
export interface Granted {
  readonly kind: "granted";
  readonly record: LeaseRecord;
  readonly key: Buffer;
  readonly value: Buffer;
  readonly token: string;
  readonly sentAt: number;
  readonly created: string;
  readonly seenAt: string;
}

/** An attempt that does not hold: with its registration when it joined the key's queue. */
export interface NotGranted {
  readonly kind: "held";
  readonly registration?: Registration;
}

/** A waiter's entry in a key's queue (its registration), until it holds or leaves. */
interface Queued {
  readonly key: Buffer;
  readonly value: Buffer;
  readonly record: LeaseRecord;
  readonly weight: number;
}

/** What {@link EntryAttempts} needs of its locker. */
export interface EntryAttemptSettings {
  readonly client: { readonly prefix: Buffer };
  readonly commands: EtcdCommands;
  /** The locker's key prefix. */
  readonly prefix: string;
  /** The locker's owner, written in every entry. */
  readonly owner: string;
  /** Permits per key (1 for a lock). */
  readonly limit: number;
}

/**
 * The attempts of an etcd locker, each an entry in the key's directory: a claim (a waiter's queued
 * entry) holds once the weights ahead of it plus its own fit the limit. A fresh attempt that joins
 * the queue puts its entry behind everybody and holds if it fits, else the entry is its
 * registration, kept here until it holds or leaves; one that does not join (`tryLock`,
 * `tryAcquire`) leaves nothing behind.
 */
export class EntryAttempts {
  readonly #settings: EntryAttemptSettings;
  /** Waiters' entries, by registration token. */
  readonly #queued = new Map<string, Queued>();
  /** The latest join of each key's queue sent (see {@link attempt}). */
  readonly #joining = new Map<string, Promise<void>>();

  constructor(settings: EntryAttemptSettings) {
    this.#settings = settings;
  }

  /** One attempt on `request.resource` with an entry on the lease `record`. */
  async attempt(request: AttemptRequest, record: LeaseRecord): Promise<Granted | NotGranted> {
    const { resource, queueing, weight } = request;
    const { commands, limit } = this.#settings;
    const directory = this.#directoryOf(resource);
    const claimed = queueing.grantedToken === undefined ? undefined : this.#queued.get(queueing.grantedToken);
    if (queueing.grantedToken !== undefined && claimed !== undefined) {
      const sentAt = performance.now();
      const { kvs, header } = await commands.range(resource, rangeOf(directory));
      const mine = kvs.find((kv) => kv.key.equals(claimed.key) && kv.value.equals(claimed.value));
      if (mine !== undefined) {
        if (!fits(kvs, mine, limit)) {
          return { kind: "held", registration: { token: queueing.grantedToken, weight, sentAt, serverMs: 0 } };
        }
        this.#queued.delete(queueing.grantedToken);
        const { record, key, value } = claimed;
        const [token, created, seenAt] = [queueing.grantedToken, mine.create_revision, header.revision];
        return { kind: "granted", record, key, value, token, sentAt, created, seenAt };
      }
      // Its entry is gone (its lease expired): a fresh attempt, at the back.
      this.#queued.delete(queueing.grantedToken);
    }
    const token = freshToken();
    const key = entryKey(directory, token);
    const value = entryValue(token, weight, this.#settings.owner);
    if (!queueing.joinOnMiss) return this.#try(request, record, directory, token, key, value);
    // etcd's own recipe: put the entry behind everybody and read where it landed, atomically.
    // Joins of one key are sent one at a time: etcd may order concurrent requests either way,
    // and this locker's waiters must queue in the order they came.
    let sentAt = 0;
    const put = { request_put: { key, value, lease: record.id } };
    const previous = this.#joining.get(resource);
    const joining = (previous ?? Promise.resolve()).then(() => {
      sentAt = performance.now();
      return commands.txn(resource, { success: [put, { request_range: rangeOf(directory) }], cleanUp: { key, value } });
    });
    const settled = joining.then(ignore, ignore);
    this.#joining.set(resource, settled);
    void settled.then(() => {
      if (this.#joining.get(resource) === settled) this.#joining.delete(resource);
    });
    const joined = await joining;
    const kvs = joined.responses[1]?.response_range?.kvs ?? [];
    const mine = kvs.find((kv) => kv.value.equals(value));
    if (mine !== undefined && fits(kvs, mine, limit)) {
      const seenAt = joined.header.revision;
      return { kind: "granted", record, key, value, token, sentAt, created: mine.create_revision, seenAt };
    }
    this.#queued.set(token, { key, value, record, weight });
    return { kind: "held", registration: { token, weight, sentAt, serverMs: 0 } };
  }

  /**
   * An attempt that does not queue (`tryAcquire`): puts its entry at once on an empty key;
   * otherwise reads the key and takes the permits when everything held and queued plus its weight
   * fits, in a transaction that checks nothing changed since (a few rounds). Leaves nothing behind.
   */
  async #try(
    request: AttemptRequest,
    record: LeaseRecord,
    directory: KeyDirectory,
    token: string,
    key: Buffer,
    value: Buffer,
  ): Promise<Granted | NotGranted> {
    const { resource, weight } = request;
    const { commands, limit } = this.#settings;
    const put = { request_put: { key, value, lease: record.id } };
    let sentAt = performance.now();
    let answer = await commands.txn(resource, {
      compare: [{ key: directory.start, range_end: directory.end, target: "Version", result: "Equal", version: 0 }],
      success: [put],
      failure: [{ request_range: rangeOf(directory) }],
      cleanUp: { key, value },
    });
    for (let round = 0; !answer.succeeded && round < FIT_ROUNDS; round++) {
      const kvs = rangeIn(answer);
      // Put by a retried transaction: decided below.
      if (kvs.some((kv) => kv.value.equals(value)) || total(kvs, limit) + weight > limit) break;
      sentAt = performance.now();
      answer = await commands.txn(resource, {
        compare: [
          {
            key: directory.start,
            range_end: directory.end,
            target: "Mod",
            result: "Less",
            mod_revision: String(BigInt(rangeRevision(answer)) + 1n),
          },
        ],
        success: [put],
        failure: [{ request_range: rangeOf(directory) }],
        cleanUp: { key, value },
      });
    }
    if (answer.succeeded) {
      const put = answer.header.revision;
      return { kind: "granted", record, key, value, token, sentAt, created: put, seenAt: put };
    }
    const own = rangeIn(answer).find((kv) => kv.value.equals(value));
    if (own !== undefined && fits(rangeIn(answer), own, limit)) {
      const seenAt = rangeRevision(answer);
      return { kind: "granted", record, key, value, token, sentAt, created: own.create_revision, seenAt };
    }
    if (own !== undefined) commands.deleteLater(key, value);
    return { kind: "held" };
  }

  /** Deletes the queued entry registered with `token`, if there is one here. Never rejects. */
  async leave(token: string): Promise<void> {
    const queued = this.#queued.get(token);
    if (queued === undefined) return;
    this.#queued.delete(token);
    await this.#settings.commands.deleteIfOurs(queued.key, queued.value).catch(() => undefined);
  }

  /** Deletes every queued entry left (their waits were rejected by the locker's close). */
  async close(): Promise<void> {
    const { commands } = this.#settings;
    await Promise.allSettled(
      Array.from(this.#queued.values(), (queued) => commands.deleteIfOurs(queued.key, queued.value)),
    );
    this.#queued.clear();
  }

  #directoryOf(resource: string): KeyDirectory {
    const { client, prefix } = this.#settings;
    return directoryOf(client.prefix, prefix, resource.slice(prefix.length));
  }
}

function ignore(): void {}
