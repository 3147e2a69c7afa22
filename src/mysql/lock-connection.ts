import type { BackendContext } from "../backend.js";
import { UnsupportedError } from "../errors.js";
import { SessionSlot } from "../sql/session-slot.js";
import { checkOutFor } from "../sql/sql-errors.js";
import type { ResolvedMySqlLockerOptions } from "./options.js";
import { ProbeWatcher } from "./probe-watcher.js";
import { isStatementError, Session, unavailable } from "./session.js";
import type { MySqlPool } from "./types.js";

/** What a {@link LockConnection} needs of its backend. */
export interface LockConnectionSettings {
  /** True while the lock connection holds or tries `resource` here (its probe has nothing to hear). */
  heldHere(resource: string): boolean;
  /** The `GET_LOCK` name the probe of `resource` waits for (see `ProbeWatcherHost.probeName`). */
  probeName?(resource: string): string;
  /** `session` ended: the backend forgets what it kept of it (see `SessionSlotSettings.forget`). */
  forget?(session: Session, current: boolean): void;
}

/**
 * A MySQL locker's one lock connection and its probes, as both MySQL backends (the lock's and the
 * semaphore's) keep them: the {@link SessionSlot} whose sessions are checked out of the caller's
 * pool, set up (the server's idle timeout, the claim) and recorded in the owner table; and the
 * {@link ProbeWatcher} that hears releases made elsewhere, cancelling its probes on this connection.
 */
export class LockConnection {
  /** The lock connection (see `SessionSlot`). */
  readonly slot: SessionSlot<Session>;
  /** How the backend hears releases (see `ProbeWatcher`). */
  readonly watcher: ProbeWatcher;
  readonly #pool: MySqlPool;
  readonly #options: ResolvedMySqlLockerOptions;
  readonly #owner: string;
  /** Whether the owner table was made (or found) by this locker. */
  #ownerTable: Promise<boolean> | undefined;

  /**
   * @param pool the caller's pool.
   * @param options the locker's options.
   * @param context the locker's owner (recorded per connection) and where losses and releases are reported.
   * @param settings what the backend adds (see {@link LockConnectionSettings}).
   */
  constructor(
    pool: MySqlPool,
    options: ResolvedMySqlLockerOptions,
    context: BackendContext,
    settings: LockConnectionSettings,
  ) {
    this.#pool = pool;
    this.#options = options;
    this.#owner = context.owner;
    const slot = new SessionSlot<Session>(options, context.events, {
      unavailable,
      open: (resource) => this.#open(resource),
      // Killed (ER_CONNECTION_KILLED), idle past wait_timeout, unconfirmed or found shared:
      // expired; else it dropped: taken.
      reasonOf: (how, cause) =>
        how === "unconfirmed" || how === "moved" || (cause as { errno?: unknown } | undefined)?.errno === 4031
          ? "expired"
          : "taken",
      ...(settings.forget === undefined ? {} : { forget: settings.forget }),
    });
    this.slot = slot;
    const watcher: ProbeWatcher = new ProbeWatcher({
      pool,
      connectTimeout: options.connectTimeout,
      limit: options.watchConnections,
      heldHere: settings.heldHere,
      released: (resource) => context.events.released(resource.slice(options.prefix.length)),
      cancel: (id) => this.#cancel(id),
      closing: () => slot.closing,
      close: () => slot.close(() => watcher.stop()),
      ...(settings.probeName === undefined ? {} : { probeName: settings.probeName }),
    });
    this.watcher = watcher;
  }

  /** `KILL QUERY id` on the lock connection; false when there is none or it failed. */
  async #cancel(id: number): Promise<boolean> {
    const session = this.slot.current;
    if (session === undefined) return false;
    try {
      await session.query("KILL QUERY ?", [id]);
      return true;
    } catch {
      return false;
    }
  }

  /** A new lock connection, checked out of the pool and set up (see `SessionSlot`). */
  async #open(resource: string): Promise<Session> {
    const connection = await checkOutFor("MySQL", this.#pool.getConnection(), this.#options.connectTimeout, resource);
    const session = new Session(
      connection,
      this.#options.operationTimeout,
      this.#options.ownerTable,
      (ended, how, cause) => this.slot.ended(ended, how, cause),
    );
    try {
      // The server ends the connection (freeing its locks) once idle for `expiry`.
      await session.setUp(Math.max(1, Math.ceil(this.#options.expiry / 1000)));
      await this.#writeOwner(session);
    } catch (error) {
      if (error instanceof UnsupportedError) throw error;
      session.end("dropped", error);
      throw unavailable(resource, error);
    }
    return session;
  }

  /** Records this locker's owner for the connection (best effort: an SQL error leaves it unknown). */
  async #writeOwner(session: Session): Promise<void> {
    const table = this.#options.ownerTable;
    this.#ownerTable ??= session
      .query(
        `CREATE TABLE IF NOT EXISTS ${table} (connection_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
          owner VARCHAR(256) CHARACTER SET utf8mb4 NOT NULL) ENGINE=InnoDB`,
      )
      .then(
        () => true,
        (error: unknown) => {
          this.#ownerTable = undefined;
          if (!isStatementError(error)) throw error;
          return false;
        },
      );
    if (!(await this.#ownerTable)) return;
    try {
      await session.query(`REPLACE INTO ${table} (connection_id, owner) VALUES (CONNECTION_ID(), ?)`, [this.#owner]);
      session.ownerWritten = true;
    } catch (error) {
      if (!isStatementError(error)) throw error;
    }
  }
}
