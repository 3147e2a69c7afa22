import type { BackendContext, LockHandle } from "../backend.js";
import { SessionSlot } from "../sql/session-slot.js";
import { channelOf } from "./keys.js";
import { MarkerWatcher } from "./marker-watcher.js";
import type { ResolvedPostgresLockerOptions } from "./options.js";
import { FencingSequence, openSession, type Session, type SessionSettings, unavailable } from "./session.js";
import type { PostgresPool } from "./types.js";

/** What a {@link LockerSession} needs of its backend. */
export interface LockerSessionSettings {
  /** A release of the caller's `key` was heard on the locker's channel. */
  notified(key: string): void;
  /** `session` ended: the backend forgets what it kept of it (see `SessionSlotSettings.forget`). */
  forget?(session: Session, current: boolean): void;
  /** What the backend closes before the session does (see `SessionSlot.close`). */
  drain?(): Promise<void>;
  /** The first watcher of `resource` here arrived (see `MarkerWatcherHost.firstWatcher`). */
  firstWatcher?(resource: string): void;
  /** The last watcher of `resource` here left (see `MarkerWatcherHost.lastWatcherLeft`). */
  lastWatcherLeft?(resource: string): void;
}

/**
 * A PostgreSQL locker's one session and what hangs on it, as both PostgreSQL backends (the locks'
 * and the semaphore's) keep them: the {@link SessionSlot} whose sessions are checked out of the
 * caller's pool and `LISTEN` on the locker's channel, the {@link MarkerWatcher} whose markers are
 * taken again on each new session, and the fencing sequence.
 */
export class LockerSession {
  /** The locker's one session (see `SessionSlot`). */
  readonly slot: SessionSlot<Session>;
  /** How the backend hears releases (see `MarkerWatcher`). */
  readonly watcher: MarkerWatcher;
  /** The sequence fencing tokens come from. */
  readonly sequence: FencingSequence;
  /** The channel the locker's releases are notified on. */
  readonly channel: string;
  readonly #pool: PostgresPool;
  /** How its sessions are set up (see `openSession`). */
  readonly #setUp: SessionSettings;
  readonly #settings: LockerSessionSettings;

  /**
   * @param pool the caller's pool.
   * @param options the locker's options.
   * @param context the locker's owner and where losses and missed releases are reported.
   * @param settings what the backend adds (see {@link LockerSessionSettings}).
   */
  constructor(
    pool: PostgresPool,
    options: ResolvedPostgresLockerOptions,
    context: BackendContext,
    settings: LockerSessionSettings,
  ) {
    this.#pool = pool;
    this.#settings = settings;
    this.channel = channelOf(options.prefix);
    const { connectTimeout, operationTimeout, expiry } = options;
    this.#setUp = { connectTimeout, operationTimeout, expiry, channel: this.channel, owner: context.owner };
    this.sequence = new FencingSequence(options.fencingSequence);
    const slot = new SessionSlot<Session>(options, context.events, {
      unavailable,
      open: (resource) => this.#open(resource),
      // Ended by the server for idleness (57P05), unconfirmed or found shared: expired; else taken.
      reasonOf: (how, cause) =>
        how === "dropped" && (cause as { code?: unknown } | undefined)?.code !== "57P05" ? "taken" : "expired",
      // Markers died with the previous session: take them again here.
      opened: () => this.watcher.sessionOpened(),
      forget: (session, current) => {
        if (current) this.watcher.sessionEnded();
        settings.forget?.(session, current);
      },
    });
    this.slot = slot;
    const drain = settings.drain ?? (async () => undefined);
    this.watcher = new MarkerWatcher({
      current: () => slot.current,
      connect: (resource) => slot.connect(resource),
      closing: () => slot.closing,
      close: () => slot.close(drain),
      ...(settings.firstWatcher === undefined ? {} : { firstWatcher: settings.firstWatcher }),
      ...(settings.lastWatcherLeft === undefined ? {} : { lastWatcherLeft: settings.lastWatcherLeft }),
    });
  }

  /** A fencing token for `handle` from the locker's sequence, or `undefined` when the session does not hold it. */
  async issueFencingToken(handle: LockHandle): Promise<bigint | undefined> {
    const session = this.slot.current;
    if (session === undefined || !session.holds.has(handle.token)) return undefined;
    await this.sequence.ensure(session, handle.resource);
    const [row] = await this.sequence.run<{ token: string }>(
      session,
      handle.resource,
      "SELECT nextval($1::regclass)::text AS token",
      [this.sequence.name],
    );
    return row === undefined ? undefined : BigInt(row.token);
  }

  /** A new session, checked out of the pool and set up (see `SessionSlot`). */
  #open(resource: string): Promise<Session> {
    return openSession(
      this.#pool,
      this.#setUp,
      {
        notified: (key) => this.#settings.notified(key),
        ended: (ended, how, cause) => this.slot.ended(ended, how, cause),
      },
      resource,
    );
  }
}
