/**
 * The command line of `globallock`: parsing (with `node:util` `parseArgs`), durations, and the
 * help text. Every mistake is a {@link UsageError} that names the bad value.
 */
import { parseArgs } from "node:util";
import { MAX_TIMER_DELAY_MS, MIN_EXPIRY_MS } from "../core/limits.js";
import { MAX_OWNER_BYTES } from "../core/locker-options.js";
import { EXIT } from "./exit-codes.js";

/** A mistake on the command line: printed with a pointer to `--help`, exit status 64. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** Where the locks live: lock files of this host (default), or one or several Redis servers. */
export type StoreChoice = { readonly kind: "file"; readonly directory: string | undefined } | RedisChoice;

/** One Redis server (a {@link RedisLocker} on one node) or several (a Redlock quorum). */
export interface RedisChoice {
  readonly kind: "redis";
  readonly urls: readonly string[];
}

/** What the lost-lock policy does (see `--on-lost`). */
export type OnLost = "warn" | "kill";

/** `globallock run`. */
export interface RunCommand {
  readonly command: "run";
  readonly store: StoreChoice;
  readonly key: string;
  /** `-s`: a shared lock (the store's read-write locker's `read` view) rather than an exclusive one. */
  readonly shared: boolean;
  /** Ms to wait for the lock; `undefined`: forever; 0: one attempt. */
  readonly waitMs: number | undefined;
  /** `-E`: the exit status when the lock is held elsewhere (a failed `--no-wait`, or `--wait` ran out). */
  readonly conflictExitCode: number | undefined;
  readonly expiryMs: number | undefined;
  readonly fencingEnv: string | undefined;
  readonly onLost: OnLost;
  readonly killAfterMs: number;
  /** `--owner`: the locker's owner (who `status` says holds the lock); default `hostname:pid`. */
  readonly owner: string | undefined;
  /** `--max-hold`: the longest the lease is kept (`AcquireOptions.maxHold`); `undefined`: no cap. */
  readonly maxHoldMs: number | undefined;
  /**
   * `--limit N`: at most N runs of the key at once (a permit of the store's semaphore each, instead
   * of the lock); `undefined`: an exclusive (or `--shared`) lock.
   */
  readonly limit: number | undefined;
  readonly json: boolean;
  /** The command and its arguments. */
  readonly argv: readonly [string, ...string[]];
}

/** `globallock status`. */
export interface StatusCommand {
  readonly command: "status";
  readonly store: StoreChoice;
  readonly key: string;
  readonly json: boolean;
}

/** `globallock doctor`: the deployment check of the chosen store. */
export interface DoctorCommand {
  readonly command: "doctor";
  readonly store: StoreChoice;
  readonly json: boolean;
}

/** `globallock list`: the held keys of the chosen store. */
export interface ListCommand {
  readonly command: "list";
  readonly store: StoreChoice;
  /** `--prefix`: only keys that start with it (default `""`: every key). */
  readonly prefix: string;
  /** `--limit`: the most keys listed (`undefined`: the library's default, 1000). */
  readonly limit: number | undefined;
  readonly json: boolean;
}

/** What the command line asks for. */
export type Invocation =
  | RunCommand
  | StatusCommand
  | DoctorCommand
  | ListCommand
  | { readonly command: "help"; readonly topic?: "run" | "status" | "doctor" | "list" }
  | { readonly command: "version" };

/** The usage lines, printed with every usage error. */
export const USAGE = `Usage:
  globallock run [options] KEY command [args...]
  globallock run [options] KEY -c 'shell command'
  globallock run [options] --key KEY -- command [args...]
  globallock run --limit N [options] KEY command [args...]
  globallock status [store options] [--json] KEY
  globallock list [store options] [--prefix P] [--limit N] [--json]
  globallock doctor [store options] [--json]
  globallock --help | --version
`;

/** The help text (`globallock --help`). */
export const HELP = `${USAGE}
Runs a command while holding a lock, so that only one copy of it runs at a time
(or at most N, with --limit N): among the processes of this host (the default:
lock files, no server needed), or across hosts through Redis. The lock is
extended while the command runs and released when it exits; the command's exit
status is passed through.

\`globallock list\` prints every held key of the store (at most --limit N, default
1000, at most 10000; --prefix P: only keys that start with P): its holder (or
how many share it), mode, time left and waiters, in 80 columns (--json: one JSON
object). On Redis only: lock files are named by a hash of the key, which cannot
be read back (exit 64).

\`globallock doctor\` checks the store's setup (an eviction policy that can drop
lock keys, no persistence, replication, refused scripts, a lock directory on a
network file system…) and prints what it finds, with the fix for each: exit 0
nothing to fix, 1 warnings, 2 errors.

Store options (run, status, list and doctor):
  --redis URL            a Redis server: redis://[user:password@]host[:port][/db]
                         (rediss:// for TLS). Repeat it for a Redlock quorum of
                         independent servers (an odd number). Default: the URLs in
                         $GLOBALLOCK_REDIS_URL (separated by commas or spaces).
                         Needs the ioredis package next to globallock.
  --dir PATH             the lock directory of the file store (default:
                         $GLOBALLOCK_DIR, else <tmpdir>/globallock-<uid>, mode 0700:
                         one user's). For locks shared by several users of the
                         host, give them one directory they can all write, e.g.
                           install -d -m 2775 -g locks /var/lock/globallock
                         (setgid, group-writable, not sticky: a sticky directory
                         stops one user from taking over another's crashed lock).
                         In a directory writable by group or others, the lock
                         files get the same group/other write permission.

KEY is the lock's name, as flock(1)'s file: the first argument that is not an
option, unless --key gives it. The command starts after it; everything from
there on is the command's, options included.

Run options:
  --key NAME             the lock's name (instead of KEY)
  -c COMMAND             run COMMAND through sh -c (instead of a command after KEY)
  -s, --shared           a shared lock: any number of shared holders at once, or
                         one exclusive (file store and one Redis server)
  -x, --exclusive        an exclusive lock (the default)
  --limit N              at most N runs of KEY at once, not one (a permit of the
                         store's semaphore each; file store and one Redis
                         server). Every run of KEY must pass the same N; runs
                         with --limit and runs without it do not exclude each
                         other. Not with --shared
  -w, --wait DURATION    give up after waiting this long for the lock (default:
                         wait as long as it takes); 0 makes one attempt
  -n, --no-wait          the same as --wait 0
  -E, --conflict-exit-code CODE
                         the exit status when the lock is held elsewhere
                         (--no-wait) or --wait ran out (default 75 and 124)
  --expiry DURATION      the lease: extended every expiry/2 while the command
                         runs; a crashed holder's lock is free after it (default 30s)
  --fencing-env NAME     pass the lock's fencing token (a number that rises with
                         every grant of the key) to the command as $NAME
                         (file store and a single Redis server)
  --on-lost warn|kill    when the lock is lost while the command runs: print a
                         warning and let it run (warn, the default), or stop it
                         (kill: SIGTERM, then SIGKILL after --kill-after)
  --kill-after DURATION  the grace between SIGTERM and SIGKILL (default 10s)
  --owner NAME           who holds the lock, as status shows it (at most 256
                         bytes; default hostname:pid)
  --max-hold DURATION    stop extending the lease after this long: it then runs
                         out and is lost (reason max-hold), and --on-lost applies
  --json                 report every event as one JSON line on stderr

Durations: 250ms, 10s, 5m, 1h, or a number of seconds (1.5). While waiting on a
terminal, one status line on stderr says who holds the lock and for how long
we have waited; nothing is printed otherwise (errors aside) unless --json.

SIGINT, SIGTERM and SIGHUP are forwarded to the command; the lock is released
after the command exits. (SIGINT is not forwarded when stdin is a terminal: a
Ctrl-C there already reaches the command, which runs in the same process group.)

If globallock itself is killed (kill -9, the OOM killer), the command dies with
it, since nothing keeps the lock alive any more: on Linux the command is started
through util-linux \`setpriv --pdeathsig KILL\` (skipped where setpriv is
missing), and a helper process SIGKILLs every process started under it (marked
by $GLOBALLOCK_RUN_ID in its environment; one that clears its environment
escapes). Elsewhere (macOS) the command can outlive a killed globallock.
Background children still running when the command exits normally are left
alone, as with flock(1).

Exit status:
  the command's own     0-255; 128+N when the command was killed by signal N
  64                    bad usage: an unknown option, a bad value, no command
  69                    the store could not be reached (Redis down, the lock
                        directory not writable)
  70                    internal error
  75                    the lock is held by someone else (--no-wait, --wait 0;
                        -E CODE changes it)
  124                   --wait ran out before the lock was obtained (-E too)
  125                   the lock was lost and --on-lost kill stopped the command
  126                   the command could not be executed
  127                   the command was not found
  128+N                 interrupted by signal N while waiting for the lock
  status: 0 held, 1 free, 64 bad usage, 69 store unreachable
  list: 0 listed (none held too), 64 bad usage or a store that cannot list,
        69 store unreachable
  doctor: 0 nothing to fix, 1 warnings, 2 errors, 64 bad usage

Examples:
  # Only one backup at a time on this host (others wait):
  npx globallock run backup ./backup.sh
  # A cron job that skips its turn when the previous run is still going:
  globallock run --no-wait report node report.js || [ $? -eq 75 ]
  # flock(1)'s way: no wait, status 0 when skipped, a shell command:
  globallock run -n -E 0 report -c 'node report.js > report.log'
  # At most 4 conversions at once on this host (GNU sem's job), the rest wait:
  globallock run --limit 4 convert ./convert.sh "$file"
  # Many readers at once, or one writer:
  globallock run -s catalog ./read-catalog.sh
  globallock run catalog ./rebuild-catalog.sh
  # Across hosts, waiting at most 5 minutes:
  globallock run --redis redis://locks.internal:6379 --key deploy --wait 5m -- ./deploy.sh
  # A Redlock quorum, the fencing token for the protected resource, stop on loss:
  globallock run --redis redis://a:6379 --redis redis://b:6379 --redis redis://c:6379 \\
    --key migrate --on-lost kill -- ./migrate.sh
  globallock run --key db --fencing-env LOCK_TOKEN -- sh -c 'psql -v token=$LOCK_TOKEN ...'
  # Is it held?
  globallock status backup
  # Which locks are held on this Redis, and by whom?
  globallock list --redis redis://locks.internal:6379 --prefix deploy
  # Is the store set up so that locks hold?
  globallock doctor --redis redis://locks.internal:6379
`;

const STORE_OPTIONS = {
  redis: { type: "string", multiple: true },
  dir: { type: "string" },
  json: { type: "boolean" },
  key: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

const RUN_OPTIONS = {
  ...STORE_OPTIONS,
  wait: { type: "string", short: "w" },
  "no-wait": { type: "boolean", short: "n" },
  "conflict-exit-code": { type: "string", short: "E" },
  shared: { type: "boolean", short: "s" },
  exclusive: { type: "boolean", short: "x" },
  command: { type: "string", short: "c" },
  expiry: { type: "string" },
  "fencing-env": { type: "string" },
  "on-lost": { type: "string" },
  "kill-after": { type: "string" },
  owner: { type: "string" },
  "max-hold": { type: "string" },
  limit: { type: "string" },
} as const;

/**
 * Parses `argv` (without the node and script paths). `env` supplies `GLOBALLOCK_REDIS_URL` and
 * `GLOBALLOCK_DIR`. Throws {@link UsageError}.
 */
export function parseCommandLine(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const [first, ...rest] = argv;
  if (first === undefined) throw new UsageError("no command given");
  if (first === "-h" || first === "--help" || first === "help") return { command: "help" };
  if (first === "-v" || first === "--version") return { command: "version" };
  if (first === "run") return parseRun(rest, env);
  if (first === "status") return parseStatus(rest, env);
  if (first === "doctor") return parseDoctor(rest, env);
  if (first === "list") return parseList(rest, env);
  throw new UsageError(`unknown command ${JSON.stringify(first)} (expected run, status, list or doctor)`);
}

/** The options of `options` that take a value: their long names, and their one-letter names. */
function valued(options: Readonly<Record<string, { type: string; short?: string }>>): {
  long: Set<string>;
  short: Set<string>;
} {
  const entries = Object.entries(options).filter(([, option]) => option.type === "string");
  return {
    long: new Set(entries.map(([name]) => name)),
    short: new Set(entries.flatMap(([, option]) => (option.short === undefined ? [] : [option.short]))),
  };
}

const RUN_VALUED = valued(RUN_OPTIONS);

/**
 * Where the options of `argv` end, as getopt's `+` mode has it (flock(1)'s): the index of the first
 * argument that is neither an option nor an option's value, or of `--`, or `argv.length`. A
 * one-letter option that takes a value takes the rest of its cluster (`-w5`) or the next argument.
 */
function endOfOptions(argv: readonly string[], takesValue: { long: Set<string>; short: Set<string> }): number {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") return i;
    if (arg.startsWith("--")) {
      if (!arg.includes("=") && takesValue.long.has(arg.slice(2))) i++;
    } else if (arg.startsWith("-") && arg.length > 1) {
      const at = Array.from(arg.slice(1)).findIndex((letter) => takesValue.short.has(letter));
      if (at === arg.length - 2) i++;
    } else return i;
  }
  return argv.length;
}

/**
 * `run [options] KEY command [args...]`, `run [options] KEY -c 'command'`, and with `--key KEY`
 * the command after the options (or after `--`).
 */
function parseRun(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const end = endOfOptions(argv, RUN_VALUED);
  const { values } = guard(() =>
    parseArgs({ args: argv.slice(0, end), options: RUN_OPTIONS, allowPositionals: false, strict: true }),
  );
  if (values.help) return { command: "help", topic: "run" };
  let rest = argv.slice(end);
  let key = values.key;
  let shell = values.command;
  if (rest[0] === "--") rest = rest.slice(1);
  else {
    if (key === undefined && rest.length > 0) [key, ...rest] = rest as [string, ...string[]];
    if (rest[0] === "-c" || rest[0] === "--command") {
      // flock(1)'s `file -c command`.
      if (shell !== undefined) throw new UsageError("-c given twice");
      if (rest.length !== 2)
        throw new UsageError("-c takes one shell command: globallock run [options] KEY -c 'command'");
      shell = rest[1];
      rest = [];
    } else if (rest[0] === "--") rest = rest.slice(1);
  }
  let command = rest;
  if (shell !== undefined) {
    if (command.length > 0) throw new UsageError("give either -c COMMAND or a command, not both");
    if (shell === "") throw new UsageError('-c: expected a shell command, received ""');
    command = ["sh", "-c", shell];
  }
  const checkedKey = keyOf(key);
  const [program, ...args] = command;
  if (program === undefined || program === "") {
    throw new UsageError("no command to run (globallock run [options] KEY command [args...])");
  }
  if (values.wait !== undefined && values["no-wait"]) throw new UsageError("give either --wait or --no-wait");
  if (values.shared && values.exclusive) throw new UsageError("give either --shared or --exclusive");
  const onLost = values["on-lost"] ?? "warn";
  if (onLost !== "warn" && onLost !== "kill") {
    throw new UsageError(`--on-lost: expected warn or kill, received ${JSON.stringify(onLost)}`);
  }
  const fencingEnv = values["fencing-env"];
  if (fencingEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(fencingEnv)) {
    throw new UsageError(
      `--fencing-env: expected an environment variable name, received ${JSON.stringify(fencingEnv)}`,
    );
  }
  const store = storeOf(values, env);
  const shared = values.shared === true;
  if (shared && store.kind === "redis" && store.urls.length > 1) {
    throw new UsageError("--shared needs one Redis server (a Redlock quorum has no shared locks)");
  }
  const limit = limitOf(values.limit);
  if (limit !== undefined) {
    if (shared) throw new UsageError("give either --limit or --shared: --limit counts runs, it takes no shared lock");
    if (store.kind === "redis" && store.urls.length > 1) {
      throw new UsageError("--limit needs the file store or one Redis server (a Redlock quorum cannot count runs)");
    }
    if (fencingEnv !== undefined && limit > 1) {
      throw new UsageError("--fencing-env needs an exclusive lock: not with --limit above 1 (runs share the key)");
    }
  }
  return {
    command: "run",
    store,
    key: checkedKey,
    shared,
    waitMs: values["no-wait"] ? 0 : optionalDuration("--wait", values.wait),
    conflictExitCode: exitCodeOf(values["conflict-exit-code"]),
    expiryMs: expiryOf(values.expiry),
    fencingEnv,
    onLost,
    killAfterMs: optionalDuration("--kill-after", values["kill-after"]) ?? 10_000,
    owner: ownerOf(values.owner),
    maxHoldMs: maxHoldOf(values["max-hold"]),
    limit,
    json: values.json === true,
    argv: [program, ...args],
  };
}

/** `status [options] KEY`, or `status --key KEY [options]`. */
function parseStatus(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const { values, positionals } = guard(() =>
    parseArgs({ args: [...argv], options: STORE_OPTIONS, allowPositionals: true, strict: true }),
  );
  if (values.help) return { command: "help", topic: "status" };
  const [key, extra] = values.key === undefined ? positionals : [values.key, ...positionals];
  if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
  return { command: "status", store: storeOf(values, env), key: keyOf(key), json: values.json === true };
}

/** `doctor [store options] [--json]`. */
function parseDoctor(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const { values, positionals } = guard(() =>
    parseArgs({ args: [...argv], options: STORE_OPTIONS, allowPositionals: true, strict: true }),
  );
  if (values.help) return { command: "help", topic: "doctor" };
  if (values.key !== undefined) throw new UsageError("doctor checks the store, not a key: drop --key");
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  return { command: "doctor", store: storeOf(values, env), json: values.json === true };
}

const LIST_OPTIONS = {
  ...STORE_OPTIONS,
  prefix: { type: "string" },
  limit: { type: "string" },
} as const;

/** `list [store options] [--prefix P] [--limit N] [--json]`. */
function parseList(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const { values, positionals } = guard(() =>
    parseArgs({ args: [...argv], options: LIST_OPTIONS, allowPositionals: true, strict: true }),
  );
  if (values.help) return { command: "help", topic: "list" };
  if (values.key !== undefined) throw new UsageError("list shows every key: drop --key (--prefix narrows it)");
  if (positionals.length > 0) {
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])} (--prefix narrows the list)`);
  }
  const text = values.limit;
  const limit = text === undefined ? undefined : /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (limit !== undefined && !(limit >= 1 && limit <= 10_000)) {
    throw new UsageError(`--limit: expected a number from 1 to 10000, received ${JSON.stringify(text)}`);
  }
  return {
    command: "list",
    store: storeOf(values, env),
    prefix: values.prefix ?? "",
    limit,
    json: values.json === true,
  };
}

/** Runs a `parseArgs` call; its errors (unknown option, missing value…) become usage errors. */
function guard<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/\. To specify a positional.*$/s, ""));
  }
}

function keyOf(key: string | undefined): string {
  if (key === undefined) throw new UsageError("no key: give the lock's name as KEY (or --key KEY)");
  if (key === "") throw new UsageError("the key is empty: give the lock's name as KEY (or --key KEY)");
  return key;
}

function storeOf(
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

/** `-E`: an exit status, 0 to 255. */
function exitCodeOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const code = /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN;
  if (!(code <= 255)) {
    throw new UsageError(
      `--conflict-exit-code: expected an exit status from 0 to 255, received ${JSON.stringify(text)}`,
    );
  }
  return code;
}

/** `--expiry`: at least {@link MIN_EXPIRY_MS} (an extension every 100 ms). */
function expiryOf(text: string | undefined): number | undefined {
  const ms = optionalDuration("--expiry", text);
  if (ms !== undefined && ms < MIN_EXPIRY_MS) {
    throw new UsageError(`--expiry: expected at least ${MIN_EXPIRY_MS}ms, received ${JSON.stringify(text)}`);
  }
  return ms;
}

/** `--owner`: a non-empty name of at most {@link MAX_OWNER_BYTES} bytes (the locker's `owner`). */
function ownerOf(text: string | undefined): string | undefined {
  if (text !== undefined && (text === "" || Buffer.byteLength(text, "utf8") > MAX_OWNER_BYTES)) {
    throw new UsageError(`--owner: expected a name of 1 to ${MAX_OWNER_BYTES} bytes, received ${JSON.stringify(text)}`);
  }
  return text;
}

/** `--max-hold`: a positive duration (the core checks it against the lease). */
function maxHoldOf(text: string | undefined): number | undefined {
  const ms = optionalDuration("--max-hold", text);
  if (ms === 0) throw new UsageError(`--max-hold: expected a positive duration, received ${JSON.stringify(text)}`);
  return ms;
}

/** `--limit`: how many runs of the key at once, a whole number from 1 to {@link MAX_RUN_LIMIT}. */
function limitOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const limit = /^\d{1,10}$/.test(text) ? Number(text) : Number.NaN;
  if (!(limit >= 1 && limit <= MAX_RUN_LIMIT)) {
    throw new UsageError(
      `--limit: expected a whole number of runs from 1 to ${MAX_RUN_LIMIT}, received ${JSON.stringify(text)}`,
    );
  }
  return limit;
}

function optionalDuration(option: string, text: string | undefined): number | undefined {
  return text === undefined ? undefined : parseDuration(option, text);
}

/** What a usage error prints (the message, then the usage lines), and its exit status. */
export function usageMessage(error: UsageError): { text: string; code: number } {
  return {
    text: `globallock: ${error.message}\n${USAGE}Try 'globallock --help' for more information.\n`,
    code: EXIT.USAGE,
  };
}
