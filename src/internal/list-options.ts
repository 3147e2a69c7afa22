import { InvalidArgumentError } from "../errors.js";
import { snapshotOptions, validateSignal } from "./validate.js";

/** The `limit` of a `list` call that gives none. */
export const DEFAULT_LIST_LIMIT = 1000;

/** The largest `limit` a `list` call may give. */
export const MAX_LIST_LIMIT = 10_000;

/** A `list` call's options, validated, defaults filled in. */
export interface ResolvedListOptions {
  readonly prefix: string;
  readonly limit: number;
}

/**
 * Validates a `list` call's signal and options (see `Locker.list`) before anything is sent: the
 * signal an `AbortSignal` or undefined, `prefix` a string, `limit` a safe integer from 1 to
 * {@link MAX_LIST_LIMIT}.
 */
export function resolveListOptions(signal: unknown, options: unknown): ResolvedListOptions {
  validateSignal(signal);
  const { prefix, limit } = snapshotOptions("options", options, ["prefix", "limit"]);
  if (prefix !== undefined && typeof prefix !== "string") {
    throw new InvalidArgumentError("options.prefix", "a string or undefined", prefix);
  }
  if (
    limit !== undefined &&
    (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
  ) {
    throw new InvalidArgumentError("options.limit", `an integer from 1 to ${MAX_LIST_LIMIT}`, limit);
  }
  return { prefix: prefix ?? "", limit: limit ?? DEFAULT_LIST_LIMIT };
}

/** `infos` sorted by key (code unit order, as `Array.prototype.sort` compares strings). */
export function sortedByKey<T extends { readonly key: string }>(infos: T[]): T[] {
  return infos.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** `fn` of each of `items`, at most `concurrency` at a time, in the order of `items`. */
export async function mapBounded<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const work = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, work));
  return results;
}
