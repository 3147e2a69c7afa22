import type { AttemptOutcome, LockHandle } from "../backend.js";
import { FencingStore } from "../sql/fencing-store.js";
import { type Session, unavailable } from "./session.js";

/**
 * A locker's fencing table: one counter row per lock name, created once per locker with
 * `CREATE TABLE IF NOT EXISTS` (concurrent creators are harmless), and again after a statement
 * found it missing. A row is bumped only on the lock connection while it holds the name's lock.
 */
export class FencingTable extends FencingStore<Session> {
  constructor(name: string) {
    super("MySQL", "table", name);
  }

  protected create(session: Session): Promise<unknown> {
    return session.query(
      `CREATE TABLE IF NOT EXISTS ${this.name} (name CHAR(43) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
          token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`,
    );
  }

  /** The next token of `name` (held by `session`): one upsert, its value read from the reply. */
  async next(session: Session, resource: string, name: string): Promise<bigint> {
    try {
      const header = await session.query<{ insertId: number | string | bigint }>(
        `INSERT INTO ${this.name} (name, token) VALUES (?, LAST_INSERT_ID(1))
          ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)`,
        [name],
      );
      return BigInt(header.insertId);
    } catch (error) {
      // The table was dropped: create it again next time.
      if ((error as { errno?: unknown }).errno === 1146) this.forget();
      throw unavailable(resource, error);
    }
  }

  /**
   * A fenced acquisition of `handle`, whose lock `name` `session` has just taken: acquired with
   * the next token of `name`; when that cannot be drawn, `backend` releases the lock and the
   * error is thrown.
   */
  async fenced(
    session: Session,
    handle: LockHandle,
    name: string,
    backend: { release(handle: LockHandle): Promise<unknown> },
  ): Promise<AttemptOutcome> {
    try {
      return { kind: "acquired", handle, fencingToken: await this.next(session, handle.resource, name) };
    } catch (error) {
      await backend.release(handle);
      throw error;
    }
  }

  /**
   * A fencing token for `handle` (see `Fencing.issueFencingToken`): the next of its lock's name
   * (`nameOf()`), or `undefined` when `session` (the live one) does not hold it.
   */
  async issue(session: Session | undefined, handle: LockHandle, nameOf: () => string): Promise<bigint | undefined> {
    if (session === undefined || !session.holds.has(handle.token)) return undefined;
    await this.ensure(session, handle.resource);
    return this.next(session, handle.resource, nameOf());
  }
}
