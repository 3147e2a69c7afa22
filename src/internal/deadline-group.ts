import { IntrusiveList, type Linked } from "./intrusive-list.js";

/** One operation waiting for its result or its deadline. */
class PendingOperation implements Linked<PendingOperation> {
  prev: PendingOperation | undefined;
  next: PendingOperation | undefined;
  list: IntrusiveList<PendingOperation> | undefined;

  constructor(
    readonly deadline: number,
    readonly expire: () => void,
  ) {}
}

const byDeadline = (operation: PendingOperation): number => operation.deadline;

/**
 * Timeouts for many short operations without a timer each: pending operations sit in an intrusive
 * list sorted by deadline (operations of one group share their timeout, so each joins at the
 * tail), and one unref'ed interval fails those past their deadline, looking only at the head. A
 * timeout may fire up to `granularity` late; in exchange an operation costs a list link and
 * unlink — no timer, and no entry in a long-lived Set — which matters at tens of thousands per
 * second. The interval stops at the first check that finds nothing pending, so a steady stream of
 * operations keeps one interval instead of starting one per operation.
 */
export class DeadlineGroup {
  readonly #granularity: number;
  readonly #pending = new IntrusiveList<PendingOperation>();
  #timer: NodeJS.Timeout | undefined;

  /** @param granularity how often to check, in ms (the maximum lateness of a timeout). */
  constructor(granularity: number) {
    this.#granularity = Math.max(1, Math.floor(granularity));
  }

  /**
   * Settles like `promise`, or rejects with `onTimeout()` once `ms` have passed (give or take the
   * granularity).
   */
  run<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const operation = new PendingOperation(performance.now() + ms, () => reject(onTimeout()));
      this.#pending.insertSorted(operation, byDeadline);
      if (this.#timer === undefined) {
        this.#timer = setInterval(() => this.#check(), this.#granularity);
        this.#timer.unref();
      }
      promise.then(
        (value) => {
          this.#pending.remove(operation);
          resolve(value);
        },
        (error: unknown) => {
          this.#pending.remove(operation);
          reject(error);
        },
      );
    });
  }

  #check(): void {
    const now = performance.now();
    for (let head = this.#pending.head; head !== undefined && head.deadline <= now; head = this.#pending.head) {
      this.#pending.remove(head);
      head.expire();
    }
    if (this.#pending.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
