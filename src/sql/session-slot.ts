import { performance } from "node:perf_hooks";
import type { BackendEvents } from "../backend.js";
import { LockerClosedError } from "../errors.js";
import type { ReleaseOutcome } from "../locker.js";
import type { Heartbeat, HeartbeatSession } from "./session-heartbeat.js";

/**
 * Why a session ended: its connection failed or ended, it could not be confirmed in time, it was
 * cleaned up, or it was found shared with other clients (a pooler or a multiplexing proxy).
 */
export type SessionEnd = "dropped" | "unconfirmed" | "retired" | "moved";

/** A store session as a {@link SessionSlot} keeps it (PostgreSQL's, MySQL's). */
export interface SlotSession extends HeartbeatSession {
  /** `performance.now()` at which the latest answered statement had been sent. */
  readonly confirmedAt: number;
  /** One cheap statement that confirms the session is alive and still its own. */
  ping(): Promise<unknown>;
  /** Cleans the session up and gives its connection back (or destroys it); never rejects. */
  retire(): Promise<void>;
  /** Ends the session (destroying its connection) for `how`, once. */
  end(how: SessionEnd, cause: unknown): void;
}

/** The locker's options a {@link SessionSlot} reads. */
export interface SessionSlotOptions {
  /** The locker's key prefix (a lost lock's error names the caller's key, without it). */
  readonly prefix: string;
  /** A lease's longest validity from a statement that confirmed its session, and the idle bound, in ms. */
  readonly expiry: number;
}

/** What a {@link SessionSlot} needs of its store. */
export interface SessionSlotSettings<S extends SlotSession> {
  /** Opens and sets up a new session; its failures are the store's typed errors. */
  open(resource: string): Promise<S>;
  /** Why the leases of a session that ended `how` (with `cause`) were lost. */
  reasonOf(how: SessionEnd, cause: unknown): "taken" | "expired";
  /** The store's error for a statement that failed on a session that lives on. */
  unavailable(resource: string, error: unknown): Error;
  /** A new session became current (a store re-takes what died with the previous one). */
  opened?(session: S): void;
  /**
   * `session` ended (`current`: it was the current one): the store forgets what it kept of it,
   * before its losses and the missed releases are reported.
   */
  forget?(session: S, current: boolean): void;
}

/**
 * The one session of a session-lock locker (PostgreSQL, MySQL): opened on first use and again after
 * it ended, kept confirmed while idle (so the server does not end it under the next call), and
 * reported when it ends — every lease on it lost, unless it was retired. A session found shared
 * with other clients makes every later attempt refuse with the error it ended with. What the two
 * stores shared line for line.
 */
export class SessionSlot<S extends SlotSession> {
  readonly #settings: SessionSlotSettings<S>;
  /** The locker's `expiry` (see {@link SessionSlotOptions}). */
  readonly #expiry: number;
  /** Where losses and missed releases are reported. */
  readonly #events: BackendEvents;
  #session: S | undefined;
  #connecting: Promise<S> | undefined;
  #closing = false;
  /** Confirms the session while it holds nothing (see {@link #keepIdleAlive}). */
  #idle: NodeJS.Timeout | undefined;
  /** Why each ended session's leases were lost. */
  readonly #reasons = new WeakMap<S, "taken" | "expired">();
  /** Set once a session was found shared: every attempt refuses with it. */
  #refusal: Error | undefined;
  /** How `extendMany` confirms the session (see `confirmSession`). */
  readonly heartbeat: Heartbeat<S>;

  /**
   * @param options the locker's options.
   * @param events where losses and missed releases are reported.
   * @param settings what the store does (see {@link SessionSlotSettings}).
   */
  constructor(options: SessionSlotOptions, events: BackendEvents, settings: SessionSlotSettings<S>) {
    this.#settings = settings;
    this.#expiry = options.expiry;
    this.#events = events;
    this.heartbeat = {
      ping: (session) => session.ping(),
      unavailable: settings.unavailable,
      reasonOf: (session) => this.#reasons.get(session),
      expiry: options.expiry,
      prefixLength: options.prefix.length,
    };
  }

  /** The live session, if there is one. */
  get current(): S | undefined {
    const session = this.#session;
    return session !== undefined && !session.ended ? session : undefined;
  }

  /** True once the locker closes. */
  get closing(): boolean {
    return this.#closing;
  }

  /** True once a session was found shared: every attempt refuses (see {@link checkRefusal}). */
  get refused(): boolean {
    return this.#refusal !== undefined;
  }

  /** The error every attempt refuses with once a session was found shared (see {@link ended}). */
  get refusal(): Error | undefined {
    return this.#refusal;
  }

  /** Throws the refusal of a locker whose session was found shared (see {@link ended}). */
  checkRefusal(): void {
    if (this.#refusal !== undefined) throw this.#refusal;
  }

  /** The live session, opened (one opening at a time) if there is none. */
  connect(resource: string): Promise<S> {
    const session = this.current;
    if (session !== undefined) return Promise.resolve(session);
    if (this.#closing) return Promise.reject(new LockerClosedError());
    this.#connecting ??= this.#open(resource).finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #open(resource: string): Promise<S> {
    const session = await this.#settings.open(resource);
    if (this.#closing) {
      await session.retire();
      throw new LockerClosedError();
    }
    this.#session = session;
    this.#keepIdleAlive(session);
    this.#settings.opened?.(session);
    return session;
  }

  /**
   * Confirms an idle session (nothing held) every half expiry, so the server does not end it for
   * idleness under the next call; leases are confirmed by their extensions.
   */
  #keepIdleAlive(session: S): void {
    const half = this.#expiry / 2;
    this.#idle = setInterval(() => {
      if (session.holds.size === 0 && performance.now() - session.confirmedAt >= half) {
        session.ping().catch(() => undefined);
      }
    }, half);
    this.#idle.unref();
  }

  /**
   * A session ended (its own report, once): unless it was retired, every lease on it is lost;
   * waiters try again.
   */
  ended(session: S, how: SessionEnd, cause: unknown): void {
    const current = this.#session === session;
    if (current) {
      clearInterval(this.#idle);
      this.#session = undefined;
    }
    this.#settings.forget?.(session, current);
    // Found shared: its locks may live on where this locker can no longer reach them.
    if (how === "moved") this.#refusal ??= cause instanceof Error ? cause : new Error(String(cause));
    const reason = this.#settings.reasonOf(how, cause);
    this.#reasons.set(session, reason);
    if (how !== "retired" && session.holds.size > 0) {
      const tokens = new Set(session.holds.keys());
      // After an extension in flight on it has reported the loss (with its error) itself.
      setImmediate(() => this.#events.lost(tokens, reason, cause));
    }
    this.#events.missed();
  }

  /**
   * Before a release on `session` while closing: true when that was its last lease and the lease
   * had run out (the session is no longer confirmed), after ending the session; the release then
   * answers "expired" without asking.
   */
  endIfLastExpired(session: S, validUntil: number): boolean {
    if (!this.#closing || session.holds.size > 0 || performance.now() < validUntil) return false;
    session.end("unconfirmed", new LockerClosedError());
    return true;
  }

  /**
   * The outcome of a release statement sent on `session`: `freed` resolves true when it freed the
   * lock, false when there was nothing to free ("expired"); a failure is "expired" when the session
   * ended with it (its locks went with it), else "unknown". While closing, the session is retired
   * once its last lease is released.
   */
  released(session: S, freed: Promise<boolean>): Promise<ReleaseOutcome> {
    return this.releasedWith(session, freed, isTrue);
  }

  /**
   * {@link released} for a statement that answers `answer`, of which `freed` (which does not
   * throw) tells whether it freed the lock, read in the same reaction: no promise in between.
   */
  releasedWith<T>(session: S, answer: Promise<T>, freed: (answer: T) => boolean): Promise<ReleaseOutcome> {
    return answer.then(
      (value) => this.#afterRelease(session, freed(value) ? "released" : "expired"),
      () => this.#afterRelease(session, session.ended ? "expired" : "unknown"),
    );
  }

  /** `outcome`, once `session` is retired if the locker closes and that was its last lease. */
  #afterRelease(session: S, outcome: ReleaseOutcome): ReleaseOutcome | Promise<ReleaseOutcome> {
    if (!this.#closing || session.holds.size > 0) return outcome;
    return session.retire().then(() => outcome);
  }

  /**
   * Stops: no new session, no idle confirmation. Once `drain` (the store's own clean-up) and any
   * opening settled, a session that holds nothing is retired; one with leases is ended `expiry`
   * from now (its leases run out meanwhile, unless released first).
   */
  async close(drain: () => Promise<void>): Promise<void> {
    this.#closing = true;
    clearInterval(this.#idle);
    await drain();
    await this.#connecting?.catch(() => undefined);
    const session = this.#session;
    if (session === undefined) return;
    if (session.holds.size === 0) {
      await session.retire();
      return;
    }
    setTimeout(() => session.end("unconfirmed", new LockerClosedError()), this.#expiry).unref();
  }
}

function isTrue(value: boolean): boolean {
  return value;
}
