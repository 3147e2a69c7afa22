/**
 * The values of `globallock`'s options: durations, exit statuses, counts, the key and the store,
 * each checked; a bad one is a {@link UsageError} that names it.
 */
import { MAX_TIMER_DELAY_MS, MIN_EXPIRY_MS } from "../core/limits.js";
import { MAX_OWNER_BYTES } from "../locker-options.js";
import type { StoreChoice } from "./invocation.js";
import { UsageError } from "./usage.js";

/** The most runs `--limit` allows at once (more is surely a typo, not a pool of processes). */
export const MAX_RUN_LIMIT = 1_000_000;

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses a duration (`250ms`, `10s`, `5m`, `1h`, or seconds) to whole milliseconds. */
export function parseDuration(option: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)?$/.exec(text.trim());
  const ms = match === null ? Number.NaN : Math.round(Number(match[1]) * (UNITS[match[2] ?? "s"] as number));
  if (!Number.isSafeInteger(ms) || ms > MAX_TIMER_DELAY_MS) {
    throw new UsageError(
      `${option}: expected a duration such as 250ms, 10s, 5m, 1h or a number of seconds, received ${JSON.stringify(text)}`,
    );
  }
  return ms;
}

/**
 * `text` as a whole number of at most `digits` digits, from `min` to `max`; else a UsageError
 * saying that `option` expected `expected`.
 */
function wholeNumber(option: string, text: string, digits: number, min: number, max: number, expected: string): number {
  const value = text.length <= digits && /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= min && value <= max)) {
    throw new UsageError(`${option}: expected ${expected}, received ${JSON.stringify(text)}`);
  }
  return value;
}

/** `-E`: an exit status, 0 to 255. */
export function exitCodeOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  return wholeNumber("--conflict-exit-code", text, 3, 0, 255, "an exit status from 0 to 255");
}

/** `--expiry`: at least {@link MIN_EXPIRY_MS} (an extension every 100 ms). */
export function expiryOf(text: string | undefined): number | undefined {
  const ms = optionalDuration("--expiry", text);
  if (ms !== undefined && ms < MIN_EXPIRY_MS) {
    throw new UsageError(`--expiry: expected at least ${MIN_EXPIRY_MS}ms, received ${JSON.stringify(text)}`);
  }
  return ms;
}

/** `--owner`: a non-empty name of at most {@link MAX_OWNER_BYTES} bytes (the locker's `owner`). */
export function ownerOf(text: string | undefined): string | undefined {
  if (text !== undefined && (text === "" || Buffer.byteLength(text, "utf8") > MAX_OWNER_BYTES)) {
    throw new UsageError(`--owner: expected a name of 1 to ${MAX_OWNER_BYTES} bytes, received ${JSON.stringify(text)}`);
  }
  return text;
}

/** `--max-hold`: a positive duration (the core checks it against the lease). */
export function maxHoldOf(text: string | undefined): number | undefined {
  const ms = optionalDuration("--max-hold", text);
  if (ms === 0) throw new UsageError(`--max-hold: expected a positive duration, received ${JSON.stringify(text)}`);
  return ms;
}

/** `run --limit`: how many runs of the key at once, a whole number from 1 to {@link MAX_RUN_LIMIT}. */
export function limitOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  return wholeNumber("--limit", text, 10, 1, MAX_RUN_LIMIT, `a whole number of runs from 1 to ${MAX_RUN_LIMIT}`);
}

/** `list --limit`: the most keys listed, 1 to 10000 (`undefined`: the library's default). */
export function listLimitOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  return wholeNumber("--limit", text, 5, 1, 10_000, "a number from 1 to 10000");
}

/** A duration option's value in ms (see {@link parseDuration}); `undefined` when not given. */
export function optionalDuration(option: string, text: string | undefined): number | undefined {
  return text === undefined ? undefined : parseDuration(option, text);
}

/** The key (`KEY` or `--key`): given and not empty. */
export function keyOf(key: string | undefined): string {
  if (key === undefined) throw new UsageError("no key: give the lock's name as KEY (or --key KEY)");
  if (key === "") throw new UsageError("the key is empty: give the lock's name as KEY (or --key KEY)");
  return key;
}

/**
 * Where the locks live: `--redis` URLs (one server, or an odd number for a quorum), else
 * `--dir`, else `$GLOBALLOCK_REDIS_URL`, else the file store in `$GLOBALLOCK_DIR` or the default
 * directory; not both kinds.
 */
export function storeOf(
  values: { redis?: string[] | undefined; dir?: string | undefined },
  env: NodeJS.ProcessEnv,
): StoreChoice {
  const fromEnv = (env.GLOBALLOCK_REDIS_URL ?? "").split(/[\s,]+/).filter(Boolean);
  const urls = values.redis ?? (values.dir === undefined ? fromEnv : []);
  if (urls.length > 0 && values.dir !== undefined) throw new UsageError("give either --redis or --dir, not both");
  if (urls.length === 0) return { kind: "file", directory: values.dir ?? (env.GLOBALLOCK_DIR || undefined) };
  for (const url of urls) checkRedisUrl(url);
  if (urls.length > 1 && urls.length % 2 === 0) {
    throw new UsageError(`--redis: a quorum needs an odd number of servers (1, 3, 5…), received ${urls.length}`);
  }
  return { kind: "redis", urls };
}

/** Throws a {@link UsageError} unless `url` is a redis:// or rediss:// URL. */
function checkRedisUrl(url: string): void {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") || !parsed.hostname) {
    throw new UsageError(
      `--redis: expected a URL such as redis://host:6379 (or rediss:// for TLS), received ${JSON.stringify(url)}`,
    );
  }
}
