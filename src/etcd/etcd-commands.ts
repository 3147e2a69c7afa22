import { DeadlineGroup } from "../internal/deadline-group.js";
import { InFlight } from "../internal/in-flight.js";
import { unavailable } from "./etcd-errors.js";
import { isLeaseGone, timedOut } from "./leases.js";
import type { EtcdClient, EtcdRangeRequest, EtcdRangeResponse, EtcdTxnRequest, EtcdTxnResponse } from "./types.js";

/** A transaction, and the entry it may put: deleted once it settles if its answer never came. */
export type CleanedTxnRequest = EtcdTxnRequest & { cleanUp?: { key: Buffer; value: Buffer } };

/**
 * How a locker talks to etcd: every command bounded by the operation timeout (of etcd's silence,
 * not this process's stalls), its failure a StoreUnavailableError; and the deletions it leaves
 * running in the background (of entries an attempt may have put, of released entries etcd did not
 * confirm), which its locker's close waits for.
 */
export class EtcdCommands {
  readonly #client: EtcdClient;
  readonly #timeoutMs: number;
  readonly #deadlines: DeadlineGroup;
  /** Background deletions in flight. */
  readonly #background = new InFlight();
  #closing = false;

  constructor(client: EtcdClient, timeoutMs: number) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
    this.#deadlines = new DeadlineGroup(timeoutMs, { inOrder: false });
  }

  /** Set by {@link close}: background deletions stop retrying, and nothing new is started. */
  get closing(): boolean {
    return this.#closing;
  }

  /**
   * Runs a transaction; a failure is a StoreUnavailableError (a LeaseGoneError is passed on). An
   * attempt whose answer never came may still have put its entry (`request.cleanUp`): it is
   * deleted once the transaction settles.
   */
  async txn(resource: string, request: CleanedTxnRequest): Promise<EtcdTxnResponse> {
    const { cleanUp, ...txn } = request;
    const sending = this.#client.kv.txn(txn, this.#callOptions());
    try {
      return await this.bound(sending);
    } catch (error) {
      if (cleanUp !== undefined) {
        this.track(sending.catch(() => undefined).then(() => this.deleteIfOurs(cleanUp.key, cleanUp.value)));
      }
      if (isLeaseGone(error)) throw error;
      throw unavailable(resource, error);
    }
  }

  /** Reads `range`; a failure is a StoreUnavailableError. */
  range(resource: string, range: EtcdRangeRequest): Promise<EtcdRangeResponse> {
    return this.call(resource, (options) => this.#client.kv.range(range, options));
  }

  /** Sends one call of the client with gRPC's deadline; a failure is a StoreUnavailableError. */
  async call<T>(resource: string, send: (options: { deadline: number }) => Promise<T>): Promise<T> {
    try {
      return await this.bound(send(this.#callOptions()));
    } catch (error) {
      throw unavailable(resource, error);
    }
  }

  /** Bounds `command` by the operation timeout (of etcd's silence, not this process's stalls). */
  bound<T>(command: Promise<T>): Promise<T> {
    return this.#deadlines.run(command, () => timedOut(this.#timeoutMs));
  }

  /** Deletes `key` if it still holds `value`; rejects on a store failure. */
  async deleteIfOurs(key: Buffer, value: Buffer): Promise<void> {
    await this.bound(
      this.#client.kv.txn(
        { compare: [{ key, target: "Value", result: "Equal", value }], success: [{ request_delete_range: { key } }] },
        this.#callOptions(),
      ),
    );
  }

  /** {@link deleteIfOurs} in the background, once. */
  deleteLater(key: Buffer, value: Buffer): void {
    this.track(this.deleteIfOurs(key, value));
  }

  /**
   * Deletes `key` if it still holds `value`, retrying with a growing delay until etcd answers, or
   * until the locker closes (its leases then run out, and the entry with them).
   */
  deleteWhenBack(key: Buffer, value: Buffer): void {
    this.track(
      (async () => {
        for (let delay = RETRY_FIRST_MS; !this.#closing; delay = Math.min(2 * delay, RETRY_MAX_MS)) {
          await new Promise((resolve) => setTimeout(resolve, delay).unref());
          if (this.#closing) return;
          try {
            await this.deleteIfOurs(key, value);
            return;
          } catch {
            // etcd still unreachable: try again.
          }
        }
      })(),
    );
  }

  /** Keeps `operation` until it settles (its failure ignored): {@link close} waits for it. */
  track(operation: Promise<unknown>): void {
    this.#background.track(operation);
  }

  /** Stops retrying and waits for every background operation (those they start included). */
  async close(): Promise<void> {
    this.#closing = true;
    await this.#background.drained();
  }

  /** gRPC's own deadline, a little past ours: the call ends on etcd's side too. */
  #callOptions(): { deadline: number } {
    return { deadline: Date.now() + 2 * this.#timeoutMs };
  }
}

/** The first delay between the tries of {@link EtcdCommands.deleteWhenBack}, in ms (it doubles). */
const RETRY_FIRST_MS = 50;

/** The longest delay between the tries of {@link EtcdCommands.deleteWhenBack}, in ms. */
const RETRY_MAX_MS = 1000;
