/**
 * A door a fake store operation waits at: the test decides when a call in flight answers, so an
 * interleaving (an abort while an attempt is in flight, a loss while an extension is in flight) is
 * set up by states, never by sleeping a number of milliseconds and hoping.
 */
export class Gate {
  /** Resolves once a call has arrived at the gate (it is in flight, waiting to answer). */
  readonly entered: Promise<void>;
  #arrived = false;
  #enter!: () => void;
  #open!: () => void;
  readonly #opened: Promise<void>;

  constructor() {
    this.entered = new Promise((resolve) => {
      this.#enter = resolve;
    });
    this.#opened = new Promise((resolve) => {
      this.#open = resolve;
    });
  }

  /** True once a call has arrived (see {@link entered}). */
  get arrived(): boolean {
    return this.#arrived;
  }

  /** Lets the call that arrived (or the next one to arrive) answer. */
  open(): void {
    this.#open();
  }

  /** Called by the fake store: holds the call until {@link open}. */
  pass(): Promise<void> {
    this.#arrived = true;
    this.#enter();
    return this.#opened;
  }
}
