import { StoreUnavailableError } from "../errors.js";
import { CreateOnce } from "../internal/create-once.js";
import { messageOf, type Session, unavailable } from "./session.js";

/**
 * A locker's fencing table: one counter row per lock name, created once per locker with
 * `CREATE TABLE IF NOT EXISTS` (concurrent creators are harmless), and again after a statement
 * found it missing. A row is bumped only on the lock connection while it holds the name's lock.
 */
export class FencingTable {
  readonly #name: string;
  readonly #created = new CreateOnce();

  constructor(name: string) {
    this.#name = name;
  }

  /** Makes sure the table exists; a failure is a StoreUnavailableError. */
  async ensure(session: Session, resource: string): Promise<void> {
    try {
      await this.#created.ensure(() =>
        session.query(
          `CREATE TABLE IF NOT EXISTS ${this.#name} (name CHAR(43) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
          token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`,
        ),
      );
    } catch (error) {
      throw new StoreUnavailableError(
        resource,
        `MySQL could not create the fencing table ${this.#name}: ${messageOf(error)}`,
        { cause: error },
      );
    }
  }

  /** The next token of `name` (held by `session`): one upsert, its value read from the reply. */
  async next(session: Session, resource: string, name: string): Promise<bigint> {
    try {
      const header = await session.query<{ insertId: number | string | bigint }>(
        `INSERT INTO ${this.#name} (name, token) VALUES (?, LAST_INSERT_ID(1))
          ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)`,
        [name],
      );
      return BigInt(header.insertId);
    } catch (error) {
      // The table was dropped: create it again next time.
      if ((error as { errno?: unknown }).errno === 1146) this.#created.forget();
      throw unavailable(resource, error);
    }
  }
}
