import { StoreUnavailableError } from "../errors.js";
import { CreateOnce } from "../internal/create-once.js";
import { messageOf, type SqlStore } from "./sql-errors.js";

/**
 * A locker's fencing counter in the database (PostgreSQL's sequence, MySQL's table): created on
 * the first fenced acquisition, and again after a statement found it gone. The store says how it
 * is created, on one of its sessions `S`, and how tokens are drawn.
 */
export abstract class FencingStore<S> {
  /** The counter's name, as written in SQL. */
  readonly name: string;
  readonly #store: SqlStore;
  /** What the counter is, in a failure's message ("sequence", "table"). */
  readonly #kind: string;
  readonly #created = new CreateOnce();

  protected constructor(store: SqlStore, kind: string, name: string) {
    this.#store = store;
    this.#kind = kind;
    this.name = name;
  }

  /**
   * Makes sure the counter exists, creating it on `session` once (again after {@link forget}); a
   * failure is a StoreUnavailableError about `resource`.
   */
  async ensure(session: S, resource: string): Promise<void> {
    try {
      await this.#created.ensure(() => this.create(session));
    } catch (error) {
      throw new StoreUnavailableError(
        resource,
        `${this.#store} could not create the fencing ${this.#kind} ${this.name}: ${messageOf(error)}`,
        { cause: error },
      );
    }
  }

  /** Creates the counter on `session` unless it exists (concurrent creators are harmless). */
  protected abstract create(session: S): Promise<unknown>;

  /** The counter was found gone: the next {@link ensure} creates it again. */
  protected forget(): void {
    this.#created.forget();
  }
}
