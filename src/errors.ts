/**
 * Typed errors. Every error this library throws or rejects with is a {@link GlobalLockError}
 * (except an abort, which rejects with the caller's own `signal.reason`, as `fetch` does).
 * Each has a stable `code` so callers can branch without `instanceof` across module copies.
 */

/** Stable machine-readable codes carried by every {@link GlobalLockError}. */
export type GlobalLockErrorCode =
  | "ERR_GLOBALLOCK_INVALID_ARGUMENT"
  | "ERR_GLOBALLOCK_CLOSED"
  | "ERR_GLOBALLOCK_STORE_UNAVAILABLE"
  | "ERR_GLOBALLOCK_LOCK_LOST"
  | "ERR_GLOBALLOCK_UNSUPPORTED";

/**
 * A registered symbol (the same in every copy of this package in a process — the ESM and the
 * CommonJS build, or two installed versions) under which each error records the names of its
 * classes, so `instanceof` works across copies.
 */
const BRAND = Symbol.for("globallock.error.classes");

/** The class names of `target`'s prototype chain up to (and including) GlobalLockError. */
function classNames(target: object): string[] {
  const names: string[] = [];
  for (let proto = Object.getPrototypeOf(target); proto !== null && proto !== Error.prototype; ) {
    names.push((proto.constructor as { name: string }).name);
    proto = Object.getPrototypeOf(proto);
  }
  return names;
}

/** Whether `value` is an instance of `cls`: by prototype, or by the brand of another copy's error. */
function isInstanceOf(cls: { name: string }, value: unknown): boolean {
  if (Function.prototype[Symbol.hasInstance].call(cls, value)) return true;
  if (typeof value !== "object" || value === null) return false;
  const names = (value as { [BRAND]?: unknown })[BRAND];
  return Array.isArray(names) && names.includes(cls.name);
}

/**
 * Base class of every error raised by globallock.
 *
 * `instanceof` works across module copies: an error thrown by the CommonJS build is an
 * `instanceof GlobalLockError` (and of its own subclass) imported from the ESM build, and the
 * other way round. Each error carries the names of its classes under a registered symbol, which
 * `Symbol.hasInstance` checks when the ordinary prototype check fails.
 */
export class GlobalLockError extends Error {
  /** Stable code; see {@link GlobalLockErrorCode}. */
  readonly code: GlobalLockErrorCode;

  constructor(code: GlobalLockErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    Object.defineProperty(this, BRAND, { value: classNames(this), enumerable: false });
  }

  /** `value instanceof C`: by prototype, or by the brand of an error from another module copy. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class on the right of `instanceof` (subclasses inherit this method), not GlobalLockError itself.
    return isInstanceOf(this, value);
  }
}

/**
 * A caller passed a value the library cannot use (bad key, expiry, signal, callback, clients…).
 * Thrown before anything is sent to a store; nothing is left half-acquired.
 * `argument` names the parameter and `received` holds the offending value.
 */
export class InvalidArgumentError extends GlobalLockError {
  /** Name of the offending parameter or option, e.g. `"key"` or `"options.expiry"`. */
  readonly argument: string;
  /** The value that was received. */
  readonly received: unknown;

  constructor(argument: string, expected: string, received: unknown) {
    super(
      "ERR_GLOBALLOCK_INVALID_ARGUMENT",
      `Invalid ${argument}: expected ${expected}, received ${describeValue(received)}`,
    );
    this.argument = argument;
    this.received = received;
  }
}

/** The locker was closed: new calls are refused and pending waits are rejected with this. */
export class LockerClosedError extends GlobalLockError {
  constructor(message = "The locker is closed") {
    super("ERR_GLOBALLOCK_CLOSED", message);
  }
}

/**
 * The lock store could not be reached or did not answer in time (for several Redis nodes:
 * fewer than a quorum answered). Never means "someone else holds the lock". `cause` holds the
 * underlying error (an `AggregateError` of per-node errors when several nodes failed).
 */
export class StoreUnavailableError extends GlobalLockError {
  /** The Redis key (prefix included) the failed operation was about. */
  readonly key: string;

  constructor(key: string, message: string, options?: { cause?: unknown }) {
    super("ERR_GLOBALLOCK_STORE_UNAVAILABLE", message, options);
    this.key = key;
  }
}

/** Why a held lock was lost. */
export type LockLostReason =
  /** An extension found the key gone or owned by another token. */
  | "taken"
  /** The lease's local deadline passed without a successful extension. */
  | "expired"
  /** The holder released it (only seen from `Lease.assertHeld()` after `release`). */
  | "released"
  /** The holder handed it to another process (only seen from `Lease.assertHeld()` after `handOff`). */
  | "handed-off"
  /** It was held for its `maxHold` and no longer extended: its lease ran out. */
  | "max-hold";

/** What a {@link LockLostError}'s message says for each reason. */
const LOST_BECAUSE: Readonly<Record<LockLostReason, string>> = {
  taken: "was lost: its key is gone or now belongs to another holder",
  expired: "was lost: its lease ran out (not extended in time, or not to be extended)",
  released: "is no longer held: it was released",
  "handed-off": "is no longer held here: it was handed off to another process",
  "max-hold": "was lost: it was held for its maxHold, then no longer extended, and its lease ran out",
};

/**
 * A held lock is no longer safely held. Delivered through the locker's `onLockLost` hook (and a
 * lease's `lost` signal); the holder is never cancelled.
 */
export class LockLostError extends GlobalLockError {
  /** The key (without prefix) of the lost lock. */
  readonly key: string;
  /** What the locker observed. */
  readonly reason: LockLostReason;

  constructor(key: string, reason: LockLostReason, options?: { cause?: unknown }) {
    super("ERR_GLOBALLOCK_LOCK_LOST", `Lock "${key}" ${LOST_BECAUSE[reason]}`, options);
    this.key = key;
    this.reason = reason;
  }
}

/** The requested feature is not available with this locker's configuration. */
export class UnsupportedError extends GlobalLockError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_GLOBALLOCK_UNSUPPORTED", message, options);
  }
}

/** Renders a received value for an error message: type plus a short, safe preview. */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  switch (typeof value) {
    case "string": {
      const preview = value.length > 40 ? `${value.slice(0, 40)}…` : value;
      return `string ${JSON.stringify(preview)} (length ${value.length})`;
    }
    case "number":
    case "bigint":
    case "boolean":
      return `${typeof value} ${String(value)}`;
    case "function":
      return "function";
    case "symbol":
      return String(value);
    default: {
      const name = (value as object).constructor?.name;
      return Array.isArray(value) ? `array of length ${value.length}` : `object ${name ?? "Object"}`;
    }
  }
}
