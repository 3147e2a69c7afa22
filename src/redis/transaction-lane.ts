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
    const connection = this.#connection;
    // Ready (the usual case): sent at once, without waiting a turn.
    const sent =
      connection !== undefined && connection.ready() === undefined
        ? this.#bound(connection.send(command), now)
        : this.#whenReady(now).then((ready) => this.#bound(ready.send(command), now));
    return sent.finally(this.#settled);
  }

  /** Runs `body` once every transaction queued before it has settled; settles as it does. */
  transaction<T>(body: (transaction: LaneTransaction) => Promise<T>): Promise<T> {
    this.#busy += 1;
    const run = this.#tail.then(() => this.#run(body));
    this.#tail = run.catch(ignore);
    return run.finally(this.#settled);
  }

  async #run<T>(body: (transaction: LaneTransaction) => Promise<T>): Promise<T> {
    const transaction = new Transaction(await this.#whenReady(), this);
    try {
      return await body(transaction);
    } finally {
      transaction.end();
    }
  }

  /** {@link #bound}, for a {@link Transaction}. */
  bound<T>(promise: Promise<T>): Promise<T> {
    return this.#deadlines.run(promise, this.#timeoutError);
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

  /** One command or transaction settled (one function for every call). */
  readonly #settled = (): void => {
    this.#busy -= 1;
    if (this.#busy === 0 && this.#closed) this.#shut();
  };

  #shut(): void {
    this.#connection?.close();
    this.#connection = undefined;
  }
}

/** Swallows an error (a transaction's failure is its caller's; the queue goes on). */
function ignore(): undefined {
  return undefined;
}

/**
 * One transaction's view of its lane's connection (see {@link LaneTransaction}): remembers whether
 * a WATCH is pending, so that one left pending when the transaction ends (a failure between its
 * WATCH and its EXEC) is cleared for the next.
 */
class Transaction implements LaneTransaction {
  readonly #connection: TransactionConnection;
  readonly #lane: TransactionLane;
  #watching = false;

  constructor(connection: TransactionConnection, lane: TransactionLane) {
    this.#connection = connection;
    this.#lane = lane;
  }

  watch(keys: readonly string[], reads: readonly Command[]): Promise<unknown[]> {
    this.#watching = true;
    return this.#lane.bound(this.#connection.watchAndRead(keys, reads));
  }

  exec(writes: readonly Command[]): Promise<unknown[] | null> {
    this.#watching = false;
    return this.#lane.bound(this.#connection.exec(writes));
  }

  unwatch(): void {
    this.#watching = false;
    this.#connection.unwatch();
  }

  /** Clears a WATCH left pending. */
  end(): void {
    if (this.#watching) this.unwatch();
  }
}
