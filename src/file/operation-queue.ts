import { IntrusiveList, type Linked } from "../internal/intrusive-list.js";

/** One queued operation: started when a slot frees up. */
class Queued implements Linked<Queued> {
  prev: Queued | undefined;
  next: Queued | undefined;
  list: IntrusiveList<Queued> | undefined;
  constructor(readonly start: () => void) {}
}

/**
 * Bounds the file operations of one store in flight, so that a burst of attempts cannot fill
 * libuv's thread pool (4 threads by default, shared by every file-system call of the process) and
 * hold up the calls that keep held locks alive. Urgent operations (extensions, releases, fencing
 * of a lock just taken) go before every waiting attempt; each class keeps its arrival order.
 */
export class OperationQueue {
  readonly #limit: number;
  #running = 0;
  readonly #urgent = new IntrusiveList<Queued>();
  readonly #normal = new IntrusiveList<Queued>();

  /** @param limit store operations in flight at most (each is a few file-system calls in a row). */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Operations waiting for a slot. */
  get queued(): number {
    return this.#urgent.size + this.#normal.size;
  }

  /** Runs `operation` when a slot is free (at once if one is), urgent ones first. */
  run<T>(urgent: boolean, operation: () => Promise<T>): Promise<T> {
    if (this.#running < this.#limit) return this.#start(operation);
    return new Promise<T>((resolve, reject) => {
      const queued = new Queued(() => void this.#start(operation).then(resolve, reject));
      (urgent ? this.#urgent : this.#normal).push(queued);
    });
  }

  /**
   * Starts `operation` in a slot, which it gives back (to the next queued one) once it settled. A
   * reaction, not an async frame: the caller hears the outcome one microtask sooner.
   */
  #start<T>(operation: () => Promise<T>): Promise<T> {
    this.#running += 1;
    let running: Promise<T>;
    try {
      running = operation();
    } catch (error) {
      this.#finished();
      return Promise.reject(error);
    }
    return running.then(
      (value) => {
        this.#finished();
        return value;
      },
      (error: unknown) => {
        this.#finished();
        throw error;
      },
    );
  }

  /** An operation settled: its slot goes to the next queued one, urgent ones first. */
  #finished(): void {
    this.#running -= 1;
    (this.#urgent.shift() ?? this.#normal.shift())?.start();
  }
}
