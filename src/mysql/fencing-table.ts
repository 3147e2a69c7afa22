import { FencingStore } from "../sql/sql-errors.js";
import { type Session, unavailable } from "./session.js";

/**
 * A locker's fencing table: one counter row per lock name, created once per locker with
 * `CREATE TABLE IF NOT EXISTS` (concurrent creators are harmless), and again after a statement
 * found it missing. A row is bumped only on the lock connection while it holds the name's lock.
 */
export class FencingTable {
  readonly #counter: FencingStore;

  constructor(name: string) {
    this.#counter = new FencingStore("MySQL", "table", name);
  }

  /** Makes sure the table exists; a failure is a StoreUnavailableError. */
  ensure(session: Session, resource: string): Promise<void> {
    return this.#counter.ensure(resource, () =>
      session.query(
        `CREATE TABLE IF NOT EXISTS ${this.#counter.name} (name CHAR(43) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
          token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`,
      ),
    );
  }

  /** The next token of `name` (held by `session`): one upsert, its value read from the reply. */
  async next(session: Session, resource: string, name: string): Promise<bigint> {
    try {
      const header = await session.query<{ insertId: number | string | bigint }>(
        `INSERT INTO ${this.#counter.name} (name, token) VALUES (?, LAST_INSERT_ID(1))
          ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)`,
        [name],
      );
      return BigInt(header.insertId);
    } catch (error) {
      // The table was dropped: create it again next time.
      if ((error as { errno?: unknown }).errno === 1146) this.#counter.forget();
      throw unavailable(resource, error);
    }
  }
}
