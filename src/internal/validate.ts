import { MAX_KEY_BYTES, MAX_TIMER_DELAY_MS, MIN_EXPIRY_MS } from "../core/limits.js";
import { InvalidArgumentError } from "../errors.js";

export { MAX_KEY_BYTES, MAX_TIMER_DELAY_MS } from "../core/limits.js";

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

/**
 * The checks every call makes before anything is sent: `signal` and `key` are valid, the locker
 * is not closed (`closing` aborted: its reason is thrown), and `signal` has not aborted (its reason
 * is thrown).
 */
export function checkCall(
  signal: unknown,
  key: unknown,
  closing: AbortSignal,
): asserts signal is AbortSignal | undefined {
  validateSignal(signal);
  validateKey(key);
  if (closing.aborted) throw closing.reason;
  (signal as AbortSignal | undefined)?.throwIfAborted();
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

/** Throws unless `value` is a non-negative safe integer (a count, such as how many connections). */
export function validateCount(name: string, value: unknown): asserts value is number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(name, "a non-negative safe integer", value);
  }
}

/**
 * Throws unless `value` is an integer from `min` to {@link MAX_TIMER_DELAY_MS}: a delay a Node.js
 * timer honours.
 */
export function validateTimerDelay(name: string, value: unknown, min = 1): asserts value is number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > MAX_TIMER_DELAY_MS) {
    throw new InvalidArgumentError(
      name,
      `an integer from ${min} to ${MAX_TIMER_DELAY_MS} (milliseconds; the longest Node.js timer delay)`,
      value,
    );
  }
}

/**
 * Throws unless `value` is a lease length every locker accepts (a locker's `expiry` or an
 * acquisition's): a safe integer of at least {@link MIN_EXPIRY_MS} ms. Longer than a timer's
 * range is fine: the lease keeper reaches a far deadline by re-arming.
 */
export function validateExpiry(name: string, value: unknown): asserts value is number {
  validatePositiveInteger(name, value, MIN_EXPIRY_MS);
}

/** Throws unless `value` is undefined or a plain object (an options bag). */
export function validateOptionsObject(name: string, value: unknown): void {
  if (value !== undefined && (value === null || typeof value !== "object" || Array.isArray(value))) {
    throw new InvalidArgumentError(name, "an options object or undefined", value);
  }
}

/** Every option of a bag, each read exactly once (`undefined` when absent). */
export type OptionsSnapshot<K extends string> = { readonly [P in K]: unknown };

/**
 * Validates the options bag `options` (named `name`) and reads each of `names` from it exactly
 * once, so that a getter or Proxy cannot hand validation one value and use another: validate the
 * snapshot, then use only the snapshot. An own enumerable key not in `names` (a misspelt option)
 * is an {@link InvalidArgumentError} that names it and lists the valid names.
 *
 * `null` stays in the snapshot for the option's own validation to reject: only `undefined` means
 * "the default" (so fill defaults with `=== undefined`, never `??`).
 */
export function snapshotOptions<const K extends string>(
  name: string,
  options: unknown,
  names: readonly K[],
): OptionsSnapshot<K> {
  validateOptionsObject(name, options);
  const bag = options as Readonly<Record<string, unknown>> | undefined;
  if (bag !== undefined) rejectUnknownKeys(name, bag, names);
  const snapshot: Partial<Record<K, unknown>> = {};
  for (const option of names) snapshot[option] = bag?.[option];
  return snapshot as OptionsSnapshot<K>;
}

function rejectUnknownKeys(name: string, bag: Readonly<Record<string, unknown>>, names: readonly string[]): void {
  for (const key of Object.keys(bag)) {
    if (names.includes(key)) continue;
    const expected =
      names.length === 0
        ? `no option (there is no option ${JSON.stringify(key)}: there are no options yet; pass undefined or {})`
        : `a known option (there is no option ${JSON.stringify(key)}; valid options: ${names.join(", ")})`;
    throw new InvalidArgumentError(`${name}.${key}`, expected, bag[key]);
  }
}

/**
 * How each option of a bag is resolved: from its snapshotted value (read once) and its full name
 * (such as `"options.fencing"`) to the value used, default filled in. Throws on a bad value.
 */
export type OptionResolvers<T> = { readonly [K in keyof T & string]-?: (value: unknown, argument: string) => T[K] };

/**
 * Resolves an options bag with one resolver per option: unknown keys are rejected (see
 * {@link snapshotOptions}), each option is read once and handed to its resolver.
 */
export function resolveEachOption<T>(name: string, options: unknown, resolvers: OptionResolvers<T>): T {
  const names = Object.keys(resolvers) as Array<keyof T & string>;
  const snapshot = snapshotOptions(name, options, names);
  const resolved: Partial<T> = {};
  for (const option of names) resolved[option] = resolvers[option](snapshot[option], `${name}.${option}`);
  return resolved as T;
}

/** `value` if it is a boolean, `fallback` if it is `undefined`; anything else (`null` too) throws. */
export function optionalBoolean(argument: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new InvalidArgumentError(argument, "a boolean or undefined", value);
  return value;
}

/**
 * `AcquireOptions` with every default filled in and validated as far as no locker is needed:
 * `expiry` against the one table of limits (core/limits.ts); `weight` against the limit is the
 * locker's check.
 */
export interface ResolvedAcquireOptions {
  /** Issue a fencing token with the grant. */
  readonly fencing: boolean;
  /** Permits to take (a positive safe integer). */
  readonly weight: number;
  /** Extend the lease while it is held. */
  readonly autoExtend: boolean;
  /** The lease length in ms, or `undefined` for the locker's own. */
  readonly expiry: number | undefined;
  /** The longest the lease may be kept, in ms, or `undefined` for no cap. */
  readonly maxHold: number | undefined;
}

/** One resolver per acquire option: adding an option is one line here (and one in the type). */
const ACQUIRE_OPTIONS: OptionResolvers<ResolvedAcquireOptions> = {
  fencing: (value, argument) => optionalBoolean(argument, value, false),
  weight: (value, argument) => {
    if (value === undefined) return 1;
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
      throw new InvalidArgumentError(argument, "a safe integer >= 1 (permits)", value);
    }
    return value;
  },
  autoExtend: (value, argument) => optionalBoolean(argument, value, true),
  // At least 1 here; the lower bound of the locker (MIN_EXPIRY_MS, or its own) is checked after.
  expiry: (value, argument) => {
    if (value === undefined) return undefined;
    validatePositiveInteger(argument, value);
    return value;
  },
  // At least 1 here; at least the lease, and only with autoExtend, is checked after.
  maxHold: (value, argument) => {
    if (value === undefined) return undefined;
    validatePositiveInteger(argument, value);
    return value;
  },
};

/** The options of a call that passed none (shared: resolving nothing allocates nothing). */
export const DEFAULT_ACQUIRE_OPTIONS: ResolvedAcquireOptions = Object.freeze({
  fencing: false,
  weight: 1,
  autoExtend: true,
  expiry: undefined,
  maxHold: undefined,
});

/**
 * Validates `acquire` options and fills in defaults: each option is read once, an unknown key or
 * a `null` value is an {@link InvalidArgumentError}; `expiry` must be at least `minExpiry`
 * ({@link MIN_EXPIRY_MS} on every store but memory, whose leases need no round trip).
 */
export function resolveAcquireOptions(options: unknown, minExpiry = MIN_EXPIRY_MS): ResolvedAcquireOptions {
  if (options === undefined) return DEFAULT_ACQUIRE_OPTIONS;
  const resolved = resolveEachOption("options", options, ACQUIRE_OPTIONS);
  if (resolved.expiry !== undefined) validatePositiveInteger("options.expiry", resolved.expiry, minExpiry);
  if (resolved.maxHold !== undefined && !resolved.autoExtend) {
    throw new InvalidArgumentError(
      "options.maxHold",
      "undefined with autoExtend: false (such a lease already ends at its expiry)",
      resolved.maxHold,
    );
  }
  return resolved;
}

/** `Locker.adopt`'s options with defaults filled in. */
export interface ResolvedAdoptOptions {
  /** Extend the adopted lease while it is held. */
  readonly autoExtend: boolean;
}

const ADOPT_OPTIONS: OptionResolvers<ResolvedAdoptOptions> = {
  autoExtend: (value, argument) => optionalBoolean(argument, value, true),
};

/** Validates `adopt` options (an unknown key or a `null` value is an {@link InvalidArgumentError}). */
export function resolveAdoptOptions(options: unknown): ResolvedAdoptOptions {
  return options === undefined ? { autoExtend: true } : resolveEachOption("options", options, ADOPT_OPTIONS);
}

/**
 * Throws unless `maxHold` (when given) is at least the lease it caps, `expiry` ms (the lease
 * length the acquisition asked for, or the locker's own).
 */
export function checkMaxHold(maxHold: number | undefined, expiry: number): void {
  if (maxHold !== undefined && maxHold < expiry) {
    throw new InvalidArgumentError(
      "options.maxHold",
      `a number of ms at least the lease's expiry (${expiry})`,
      maxHold,
    );
  }
}

/**
 * Throws unless `weight` (already a positive integer) is at most the locker's `limit` of permits
 * per key (1 for a lock and for each view of a read-write locker).
 */
export function checkWeight(weight: number, limit: number, what: string): void {
  if (weight > limit) {
    throw new InvalidArgumentError("options.weight", `an integer from 1 to ${limit} (${what})`, weight);
  }
}
