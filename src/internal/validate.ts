import { InvalidArgumentError } from "../errors.js";

/** Longest accepted key, in UTF-8 bytes (before the prefix is added). */
export const MAX_KEY_BYTES = 1024;

/** Throws unless `key` is a non-empty string of at most {@link MAX_KEY_BYTES} UTF-8 bytes. */
export function validateKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || key.length === 0) {
    throw new InvalidArgumentError("key", "a non-empty string", key);
  }
  // A UTF-16 code unit takes at most 3 UTF-8 bytes: short keys need no byte count.
  if (key.length * 3 > MAX_KEY_BYTES && Buffer.byteLength(key, "utf8") > MAX_KEY_BYTES) {
    throw new InvalidArgumentError("key", `a string of at most ${MAX_KEY_BYTES} UTF-8 bytes`, key);
  }
}

/** Throws unless `signal` is `undefined` or an `AbortSignal`. */
export function validateSignal(signal: unknown): asserts signal is AbortSignal | undefined {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError("signal", "an AbortSignal or undefined", signal);
  }
}

/** Throws unless `value` is a function. */
export function validateFunction(name: string, value: unknown): asserts value is (...args: never[]) => unknown {
  if (typeof value !== "function") {
    throw new InvalidArgumentError(name, "a function", value);
  }
}

/** Throws unless `value` is a positive safe integer not below `min`. */
export function validatePositiveInteger(name: string, value: unknown, min = 1): asserts value is number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidArgumentError(name, `a safe integer >= ${min} (milliseconds)`, value);
  }
}

/** Throws unless `value` is undefined or a plain object (an options bag). */
export function validateOptionsObject(name: string, value: unknown): void {
  if (value !== undefined && (value === null || typeof value !== "object" || Array.isArray(value))) {
    throw new InvalidArgumentError(name, "an options object or undefined", value);
  }
}

/** Validates `acquire` options and fills in defaults. */
export function resolveAcquireOptions(options: unknown): { fencing: boolean } {
  validateOptionsObject("options", options);
  const fencing = (options as { fencing?: unknown } | undefined)?.fencing ?? false;
  if (typeof fencing !== "boolean") throw new InvalidArgumentError("options.fencing", "a boolean", fencing);
  return { fencing };
}
