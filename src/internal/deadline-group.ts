import { performance } from "node:perf_hooks";
import { IntrusiveList, type Linked } from "./intrusive-list.js";

/** One operation waiting for its result or its deadline. */
class PendingOperation implements Linked<PendingOperation> {
  prev: PendingOperation | undefined;
  next: PendingOperation | undefined;
  list: IntrusiveList<PendingOperation> | undefined;

  constructor(
    readonly deadline: number,
    readonly reject: (reason: unknown) => void,
    readonly onTimeout: () => Error,
  ) {}

  /** Rejects the operation's promise with its timeout error. */
  expire(): void {
    this.reject(this.onTimeout());
  }
}

const byDeadline = (operation: PendingOperation): number => operation.deadline;

/** How a {@link DeadlineGroup} counts silence. */
export interface DeadlineGroupOptions {
  /**
   * The group's operations share one connection whose server answers in order (one Redis node, a
   * PostgreSQL session): any answer is progress, and an operation times out only after the
   * timeout passed both since it was sent and since the latest answer. A server working through a
   * long queue of this process's commands is busy, not down. Not for a group spread over several
   * servers (a Cluster), where one server's answers say nothing of another's.
   */
  readonly inOrder: boolean;
}

/**
 * Timeouts for many short operations without a timer each, that measure the *store's* silence,
 * not this process's business.
 *
 * - **A busy server is not a silent one** (with `inOrder`): see {@link DeadlineGroupOptions}.
 * - **A reply that has arrived wins.** The check that finds operations past their deadline runs in
 *   the event loop's timers phase, before the poll phase reads the sockets; so it only schedules
 *   their expiry for the check phase (`setImmediate`), after the poll phase has read every reply
 *   already waiting. An operation answered meanwhile is gone by then.
 * - **Only time this process could listen counts.** Deadlines are kept on a clock that advances
 *   with `performance.now()` from one check to the next, but by at most two check intervals per
 *   step: a longer step means the event loop was stalled (a burst of calls made synchronously, a
 *   long GC pause, a starved CPU), and no reply could have been read meanwhile, however fast the
 *   store answered. So a burst of 10,000 calls that takes this process a second to send cannot time
 *   out its own first calls, while a store that stays silent is still declared so after about the
 *   timeout of running event loop (and at least five loop turns).
 *
 * Pending operations sit in an intrusive list sorted by deadline (operations of one group share
 * one timeout, so each joins at the tail), and one unref'ed interval looks only at the head. A
 * timeout may fire up to `granularity` late; in exchange an operation costs a list link and unlink
 * — no timer, and no entry in a long-lived Set — which matters at tens of thousands per second. The
 * interval stops at the first check that finds nothing pending, and the clock does not advance
 * while it is stopped.
 */
export class DeadlineGroup {
  readonly #timeoutMs: number;
  readonly #inOrder: boolean;
  readonly #granularity: number;
  /** The longest step the clock takes at once (longer ones are stalls of this process). */
  readonly #maxStep: number;
  readonly #pending = new IntrusiveList<PendingOperation>();
  #timer: NodeJS.Timeout | undefined;
  #expiry: NodeJS.Immediate | undefined;
  /** Time credited to operations so far, in ms (see the class comment). */
  #credited = 0;
  /** `performance.now()` when {@link #credited} last advanced. */
  #advancedAt = 0;
  /** The clock's reading at the latest answer, with `inOrder` (else never moves). */
  #answeredAt = Number.NEGATIVE_INFINITY;
  readonly #expireDue = (): void => this.#expire();

  /**
   * @param timeoutMs every operation's timeout; checked every tenth of it, so a timeout fires at
   *   most 10% late.
   */
  constructor(timeoutMs: number, options: DeadlineGroupOptions) {
    this.#timeoutMs = timeoutMs;
    this.#inOrder = options.inOrder;
    this.#granularity = Math.max(1, Math.floor(timeoutMs / 10));
    this.#maxStep = 2 * this.#granularity;
  }

  /**
   * Settles like `promise`, or rejects with `onTimeout()` once the timeout of listening time has
   * passed (give or take a tenth) without it settling. `now`: `performance.now()` as the caller
   * read it just before sending (a clock read saved), else read here. `onError`, when given, is
   * what a rejection of `promise` (not a timeout) becomes: the result settles like its return
   * value, or rejects with what it throws — a fallback in the same reaction, not one more promise
   * and microtask on every answer.
   */
  run<T>(
    promise: Promise<T>,
    onTimeout: () => Error,
    now = performance.now(),
    onError?: (error: unknown) => T | Promise<T>,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const operation = new PendingOperation(this.#start(now) + this.#timeoutMs, reject, onTimeout);
      this.#pending.insertSorted(operation, byDeadline);
      promise.then(
        (value) => {
          this.#answered(operation);
          resolve(value);
        },
        (error: unknown) => {
          if (operation.list === undefined) return; // timed out already: settled
          this.#answered(operation);
          if (onError === undefined) {
            reject(error);
            return;
          }
          try {
            resolve(onError(error));
          } catch (mapped) {
            reject(mapped);
          }
        },
      );
    });
  }

  #answered(operation: PendingOperation): void {
    if (operation.list === undefined) return; // timed out already
    this.#pending.remove(operation);
    if (this.#inOrder) this.#answeredAt = this.#credited;
  }

  /** Whether the head has timed out: past its deadline, and (in order) no answer for a timeout. */
  #headExpired(head: PendingOperation): boolean {
    return head.deadline <= this.#credited && this.#answeredAt + this.#timeoutMs <= this.#credited;
  }

  /**
   * The clock's reading for an operation starting at `now` (`performance.now()`), starting the
   * interval if it is stopped.
   */
  #start(now: number): number {
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#check(), this.#granularity);
      this.#timer.unref();
      this.#advancedAt = now;
      return this.#credited;
    }
    // Within a synchronous burst the clock does not move; the reading still counts the time since
    // the last check (up to one step), so that an operation never times out early.
    return this.#credited + Math.min(now - this.#advancedAt, this.#maxStep);
  }

  #check(): void {
    const now = performance.now();
    this.#credited += Math.min(now - this.#advancedAt, this.#maxStep);
    this.#advancedAt = now;
    const head = this.#pending.head;
    if (head === undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    } else if (this.#expiry === undefined && this.#headExpired(head)) {
      // After the poll phase, which reads the replies already waiting in the sockets.
      this.#expiry = setImmediate(this.#expireDue);
      this.#expiry.unref();
    }
  }

  #expire(): void {
    this.#expiry = undefined;
    for (
      let head = this.#pending.head;
      head !== undefined && head.deadline <= this.#credited;
      head = this.#pending.head
    ) {
      this.#pending.remove(head);
      head.expire();
    }
  }
}
