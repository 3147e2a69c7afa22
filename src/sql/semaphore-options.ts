import { InvalidArgumentError } from "../errors.js";
import { validateOptionsObject } from "../internal/validate.js";

/** The message of `fencing: true` on a semaphore whose limit is above 1. */
export function semaphoreFencingRefusal(limit: number): string {
  return `Fencing tokens need an exclusive grant; a semaphore with limit ${limit} shares its permits`;
}

/**
 * A semaphore's options (the SQL stores' semaphores): its `limit`, a safe integer from 1 to
 * `most`, and the rest, a locker's options whose `prefix` defaults to `defaultPrefix`. Throws
 * InvalidArgumentError.
 */
export function semaphoreOptions<Options extends { prefix?: string | undefined }>(
  options: unknown,
  most: number,
  defaultPrefix: string,
): { readonly limit: number; readonly given: Options } {
  validateOptionsObject("options", options);
  const { limit, ...rest } = (options ?? {}) as { limit?: unknown };
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1 || limit > most) {
    throw new InvalidArgumentError("options.limit", `an integer from 1 to ${most} (permits per key)`, limit);
  }
  const given = { ...rest } as Options;
  if (given.prefix === undefined) given.prefix = defaultPrefix;
  return { limit, given };
}
