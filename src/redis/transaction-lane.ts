import { DeadlineGroup } from "../internal/deadline-group.js";
import type { Command, TransactionConnection } from "./client/redis-connection.js";

/** One transaction's use of a {@link TransactionLane}: each call bounded by the lane's timeout. */
export interface LaneTransaction {
  /** WATCH `keys`, then `reads` (see TransactionConnection.watchAndRead). */
  watch(keys: readonly string[], reads: readonly Command[]): Promise<unknown[]>;
  /** MULTI, `writes`, EXEC: the writes' replies, or `null` when aborted. */
  exec(writes: readonly Command[]): Promise<unknown[] | null>;
  /** Ends a transaction that writes nothing (UNWATCH, not waited for). */
  unwatch(): void;
}

/** Where a resource's transactions go: the lane of the node that holds it. */
export interface LaneRouter {
  /** Runs `body` on the lane of the node that holds `resource`. */
  transaction<T>(resource: string, body: (transaction: LaneTransaction) => Promise<T>): Promise<T>;
  /** One command outside transactions, on the lane of the node that holds `resource`. */
  send(resource: string, command: Command, now?: number): Promise<unknown>;
  /** Closes every lane once idle. */
  close(): void;
}

/** The router of one node (or a Sentinel's master): one lane for every resource. */
export function oneLane(lane: TransactionLane): LaneRouter {
  return {
    transaction: (_resource, body) => lane.transaction(body),
    send: (_resource, command, now) => lane.send(command, now),
    close: () => lane.close(),
  };
}

/**
 * The connection a locker without scripts sends its commands on (see scriptless-store.ts), opened
 * on first use, with its transactions one at a time. WATCH belongs to the connection, so two
 * transactions between their WATCH and their EXEC at once would each abort on the other's keys, or
 * worse, run one's writes under the other's WATCH; a transaction therefore starts once the one
 * before it has settled. Single commands outside transactions (a SET NX) go out at once: a SET of
 * a key some transaction watches only aborts that transaction, which reads again.
 *
 * Every command settles within the timeout, counted as the script runner counts it (the server's
 * silence, see DeadlineGroup). A transaction that fails between its WATCH and its EXEC (a timeout,
 * an error) leaves an UNWATCH behind it, so the next one does not abort on its keys.
 *
 * `close()` closes the connection once nothing is in flight. A call after it (a release after the
 * locker closed, which must still work) opens a connection again, closed again once idle.
 */
export class TransactionLane {
  readonly #open: () => TransactionConnection;
  readonly #label: string;
  readonly #timeoutMs: number;
  readonly #deadlines: DeadlineGroup;
  #connection: TransactionConnection | undefined;
  /** Settles when the latest transaction queued has settled. */
  #tail: Promise<unknown> = Promise.resolve();
  /** Commands and transactions in flight or queued. */
  #busy = 0;
  #closed = false;
  readonly #timeoutError = (): Error => new Error(`Redis ${this.#label} did not answer within ${this.#timeoutMs} ms`);

  /** @param open makes a new connection (see RedisConnection.openTransactions). */
  constructor(open: () => TransactionConnection, label: string, timeoutMs: number) {
    this.#open = open;
    this.#label = label;
    this.#timeoutMs = timeoutMs;
    this.#deadlines = new DeadlineGroup(timeoutMs, { inOrder: true });
  }

  /** One command outside any transaction, sent at once (once connected); `now` as in ScriptRunner.run. */
  send(command: Command, now?: number): Promise<unknown> {
    this.#busy += 1;
    return this.#whenReady(now)
      .then((connection) => this.#bound(connection.send(command), now))
      .finally(() => this.#settled());
  }

  /** Runs `body` once every transaction queued before it has settled; settles as it does. */
  transaction<T>(body: (transaction: LaneTransaction) => Promise<T>): Promise<T> {
    this.#busy += 1;
    const run = this.#tail.then(async () => {
      const connection = await this.#whenReady();
      let open = false;
      const transaction: LaneTransaction = {
        watch: (keys, reads) => {
          open = true;
          return this.#bound(connection.watchAndRead(keys, reads));
        },
        exec: (writes) => {
          open = false;
          return this.#bound(connection.exec(writes));
        },
        unwatch: () => {
          open = false;
          connection.unwatch();
        },
      };
      try {
        return await body(transaction);
      } finally {
        if (open) connection.unwatch();
      }
    });
    this.#tail = run.catch(() => undefined);
    return run.finally(() => this.#settled());
  }

  /** Closes the connection once nothing is in flight (see the class comment). Idempotent. */
  close(): void {
    this.#closed = true;
    if (this.#busy === 0) this.#shut();
  }

  /** The connection, opened if need be, once ready; rejects with the timeout when it is not in time. */
  #whenReady(now?: number): Promise<TransactionConnection> {
    this.#connection ??= this.#open();
    const connection = this.#connection;
    const ready = connection.ready();
    if (ready === undefined) return Promise.resolve(connection);
    return this.#bound(ready, now).then(() => connection);
  }

  #bound<T>(promise: Promise<T>, now?: number): Promise<T> {
    return this.#deadlines.run(promise, this.#timeoutError, now);
  }

  #settled(): void {
    this.#busy -= 1;
    if (this.#busy === 0 && this.#closed) this.#shut();
  }

  #shut(): void {
    this.#connection?.close();
    this.#connection = undefined;
  }
}
