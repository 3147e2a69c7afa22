/**
 * Records what globallock publishes on its diagnostics channels (src/diagnostics.ts), for the
 * diagnostics tests: every message of every channel, copied as it was at its event.
 */
import diagnostics_channel from "node:diagnostics_channel";
import {
  ACQUIRE_CHANNEL,
  type AcquireMessage,
  EXTEND_CHANNEL,
  type ExtendMessage,
  LOST_CHANNEL,
  type Locker,
  type LostMessage,
  RELEASE_CHANNEL,
  type ReleaseMessage,
} from "../../src/index.js";

/** One event of a traced call: its message as it was then, and which event it was. */
export type AcquireEvent = AcquireMessage & { readonly event: "start" | "end" | "asyncStart" | "asyncEnd" | "error" };

/** Everything published while it runs, each message copied as it was at its event. */
export class Recorder {
  readonly acquires: AcquireEvent[] = [];
  readonly releases: ReleaseMessage[] = [];
  readonly extends: ExtendMessage[] = [];
  readonly lost: LostMessage[] = [];
  /** Every message of every channel, in publication order, as `[channel, message]`. */
  readonly order: Array<[string, unknown]> = [];
  readonly #tracing = diagnostics_channel.tracingChannel<unknown, AcquireMessage>(ACQUIRE_CHANNEL);
  readonly #handlers = {
    start: (message: AcquireMessage) => this.#acquire("start", message),
    end: (message: AcquireMessage) => this.#acquire("end", message),
    asyncStart: (message: AcquireMessage) => this.#acquire("asyncStart", message),
    asyncEnd: (message: AcquireMessage) => this.#acquire("asyncEnd", message),
    error: (message: AcquireMessage) => this.#acquire("error", message),
  };
  readonly #onRelease = (message: unknown): void => {
    this.releases.push({ ...(message as ReleaseMessage) });
    this.order.push([RELEASE_CHANNEL, message]);
  };
  readonly #onExtend = (message: unknown): void => {
    this.extends.push({ ...(message as ExtendMessage) });
    this.order.push([EXTEND_CHANNEL, message]);
  };
  readonly #onLost = (message: unknown): void => {
    this.lost.push({ ...(message as LostMessage) });
    this.order.push([LOST_CHANNEL, message]);
  };

  constructor() {
    this.#tracing.subscribe(this.#handlers);
    diagnostics_channel.subscribe(RELEASE_CHANNEL, this.#onRelease);
    diagnostics_channel.subscribe(EXTEND_CHANNEL, this.#onExtend);
    diagnostics_channel.subscribe(LOST_CHANNEL, this.#onLost);
  }

  stop(): void {
    this.#tracing.unsubscribe(this.#handlers);
    diagnostics_channel.unsubscribe(RELEASE_CHANNEL, this.#onRelease);
    diagnostics_channel.unsubscribe(EXTEND_CHANNEL, this.#onExtend);
    diagnostics_channel.unsubscribe(LOST_CHANNEL, this.#onLost);
  }

  /** The acquire events of `locker`'s calls (optionally of one mode). */
  acquiresOf(locker: Locker, mode?: AcquireMessage["mode"]): AcquireEvent[] {
    return this.acquires.filter((e) => e.locker === locker && (mode === undefined || e.mode === mode));
  }

  /** The final state (asyncEnd) of each of `locker`'s calls, in order. */
  outcomesOf(locker: Locker): AcquireEvent[] {
    return this.acquiresOf(locker).filter((e) => e.event === "asyncEnd");
  }

  #acquire(event: AcquireEvent["event"], message: AcquireMessage): void {
    this.acquires.push({ ...message, event });
    this.order.push([ACQUIRE_CHANNEL, message]);
  }
}

/** Records for the duration of `run`. */
export async function recording(run: (recorder: Recorder) => Promise<void>): Promise<Recorder> {
  const recorder = new Recorder();
  try {
    await run(recorder);
  } finally {
    recorder.stop();
  }
  return recorder;
}

/** The `waitingCount` every locker class has (not on the Locker interface). */
export function waitingCount(locker: Locker): number {
  return (locker as unknown as { waitingCount: number }).waitingCount;
}
