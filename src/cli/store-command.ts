import type { StoreChoice } from "./invocation.js";
import type { Reporter } from "./reporter.js";
import { failure } from "./run.js";
import { type OpenStore, openStore } from "./store.js";

/** Where `status`, `list` and `doctor` print their answer (stdout; a stand-in in tests). */
export interface Stdout {
  write(text: string): unknown;
}

/**
 * What `status`, `list` and `doctor` do around their own work: open the chosen store (its
 * exclusive locker, no locker options), run `use` on it and close it again. A failure (the store
 * unreachable, refused options, a store that cannot answer) is reported for the key `key` (`""`
 * when the command has none) and answers its exit status.
 */
export async function withStore(
  choice: StoreChoice,
  key: string,
  reporter: Reporter,
  use: (store: OpenStore) => Promise<number>,
): Promise<number> {
  let store: OpenStore | undefined;
  try {
    store = await openStore(choice, {}, false);
    return await use(store);
  } catch (error) {
    return failure(error, { key }, reporter);
  } finally {
    await store?.close().catch(() => undefined);
  }
}
